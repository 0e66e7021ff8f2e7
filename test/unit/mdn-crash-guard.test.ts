import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { MdnDelivery } from '../../services/platform/avro/records';
import { recordDigest, type CrashMark, type CrashMarks } from '../../services/platform/log/crash-guard';
import type { LogRecord } from '../../services/platform/log/event-log';
import { stageBatchBudget } from '../../services/platform/log/stage-batch';
import { pipelineTopics } from '../../services/platform/log/topics';
import { silentLogger } from '../../services/platform/logger/logger';
import { ObjectStoreError, type ObjectStore } from '../../services/platform/store/object-store';
import { NotDue } from '../../services/mdn/due-gate';
import { mdnGroup, STAGE_CRASHED_REASON, startMdnStage } from '../../services/mdn/mdn-stage';
import { capturedStages } from '../support/captured-stages';
import { memoryMarks } from '../support/memory-marks';

/**
 * The mdn stage under the crash guard (crash-guard.ts), its batch handler called as an adapter would: a delivery
 * waiting for its due time is not in hand (no mark, the guard told of the first batch once one is handed over),
 * and a convicted delivery is dead-lettered as the stage's other dead letters are, from its own input topic.
 */
const codec = defaultAvroCodec();
const topics = pipelineTopics(undefined);

/** The stage's batch handler of the deliveries topic, with the clock it runs by. */
async function mdnStage(marks: CrashMarks) {
  let clock = 1_000_000;
  const { log, handlers } = capturedStages();
  // No failure MDN was kept for the request; evidence puts succeed.
  const store = { get: async (path: string) => { throw new ObjectStoreError(`no object at ${path}`, 'not-found'); }, put: async () => ({}) } as unknown as ObjectStore;
  const stage = await startMdnStage({
    log, topics, codec, store, logger: silentLogger, recordKey: 'workflow', crashMarks: marks, now: () => clock,
    retry: { delaysMs: [30_000, 300_000, 1_800_000], windowMs: 3_600_000, firstAttemptDelayMs: 100 },
    // Not listed any more: the attempt gives up without a POST.
    stillAllowed: async () => false,
  });
  return { handle: handlers.get(topics.mdnDeliveries)!.handle, stage, advance: (ms: number) => { clock += ms; }, now: () => clock };
}

function deliveryRecord(offset: string, dueAt: number, attempts: MdnDelivery['attempts'] = []): LogRecord {
  const delivery: MdnDelivery = {
    requestId: `r-${offset}`, workflowId: 'wf', messageId: '<m@p>', mdnMessageId: '<mdn@i>', url: 'https://partner.example/mdn', allowedBy: 'https://partner.example/',
    mdn: Buffer.from('message-id: <mdn@i>\r\n\r\nx'), receivedAt: dueAt - 100, dueAt, attempts,
  };
  return { topic: topics.mdnDeliveries, partition: 0, offset, key: 'wf', value: codec.encode('MdnDelivery', delivery), headers: {}, timestamp: 7 };
}

test('a first batch whose head is not due writes no mark; the guard is told it is the first once the head is handed over', async () => {
  const marks = memoryMarks();
  const { handle, stage, advance, now } = await mdnStage(marks);
  try {
    const batch = [deliveryRecord('5', now() + 60_000), deliveryRecord('6', now() + 60_000)];
    const waiting = await handle(batch, stageBatchBudget(1 << 20, true));
    expect(waiting.outputs).toEqual([]);
    expect(waiting.failure?.error).toBeInstanceOf(NotDue);
    expect(marks.writes).toBe(0);
    advance(60_000);
    // The adapter no longer says first: the stage remembers it was owed.
    const handled = await handle(batch, stageBatchBudget(1 << 20, false));
    expect(handled.outputs).toHaveLength(2);
    expect(codec.decode('MdnOutcome', handled.outputs[0][0].value)).toMatchObject({ requestId: 'r-5', outcome: 'given_up' });
    expect(marks.held.get(`${mdnGroup(topics, topics.mdnDeliveries)}/${topics.mdnDeliveries}/0`)).toMatchObject({ from: '5', to: '6', alone: false });
    expect(marks.writes).toBe(1);
    // Steady batches write nothing.
    await handle([deliveryRecord('7', now())], stageBatchBudget(1 << 20, false));
    expect(marks.writes).toBe(1);
  } finally {
    await stage.stop();
  }
});

test('a delivery convicted of ending the process is dead-lettered stage-crashed unsent, from its own topic, as the mdn stage\'s letters are replayed, with an outcome that says so', async () => {
  const marks = memoryMarks();
  const { handle, stage, now } = await mdnStage(marks);
  try {
    const pill = deliveryRecord('9', now(), [{ at: now() - 30_000, status: 503, reason: 'HTTP 503' }]);
    // What a life that ended with this delivery alone in hand, after an earlier one had (a strike), leaves behind.
    await marks.swap(mdnGroup(topics, topics.mdnDeliveries), topics.mdnDeliveries, 0, { from: '9', record: recordDigest(pill), to: '10', alone: true, strikes: 1, writer: 'a life that ended', at: now() }, null);
    const result = await handle([pill, deliveryRecord('10', now())], stageBatchBudget(1 << 20, true));
    expect(result.outputs).toHaveLength(1);
    const [letter, outcome] = result.outputs[0];
    expect(result.outputs[0]).toHaveLength(2);
    // What a given-up delivery leaves on the outcomes topic, keyed as the delivery: made from the record, no attempt run.
    expect(outcome.topic).toBe(topics.mdnOutcomes);
    expect(outcome.key).toBe('wf');
    expect(codec.decode('MdnOutcome', outcome.value)).toEqual({
      requestId: 'r-9', workflowId: 'wf', messageId: '<m@p>', mdnMessageId: '<mdn@i>', url: 'https://partner.example/mdn',
      outcome: 'dead_lettered', attempts: 1, at: now(), status: null, reason: STAGE_CRASHED_REASON, nextAttemptAt: null,
    });
    expect(letter.topic).toBe(topics.deadLetter);
    const dead = codec.decode('DeadLetter', letter.value);
    expect([dead.stage, dead.errorCode, dead.workflowId, dead.source.topic, dead.source.offset]).toEqual(['mdn', 'stage-crashed', 'wf', topics.mdnDeliveries, '9']);
    expect(dead.source.value.equals(pill.value)).toBe(true);
    // The record after it is handled alone (the rest of the range), and delivered as usual.
    const next = await handle([deliveryRecord('10', now())], stageBatchBudget(1 << 20, false));
    expect(codec.decode('MdnOutcome', next.outputs[0][0].value)).toMatchObject({ requestId: 'r-10' });
  } finally {
    await stage.stop();
  }
});
