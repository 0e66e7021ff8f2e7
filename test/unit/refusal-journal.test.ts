import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Refused } from '../../services/platform/avro/records';
import type { OutRecord } from '../../services/platform/log/event-log';
import { silentLogger } from '../../services/platform/logger/logger';
import { createRefusalJournal } from '../../services/receiver/refusal-journal';

/** The refusal journal's bounds, with a log that records appends and a clock the test moves. */
const codec = defaultAvroCodec();
const refusal = (workflowId: string, n: number): Refused => ({
  requestId: `r-${workflowId}-${n}`, workflowId, triggerNode: 'In', triggerKind: 'webhook', status: 401, code: 'authorization-required',
  receivedAt: 1_700_000_000_000 + n, remoteAddress: '192.0.2.1', messageId: null, bodyBytes: 0, traceparent: null,
});

function harness(options: { perMinute: number; maxPending?: number; failing?: boolean }) {
  let clock = 0;
  const appended: OutRecord[][] = [];
  let release: () => void = () => undefined;
  const dropped: Record<string, number> = {};
  const log = {
    append: (records: OutRecord[]) => new Promise<void>((resolve, reject) => {
      appended.push(records);
      release = options.failing ? () => reject(new Error('log down')) : resolve;
    }),
  };
  const journal = createRefusalJournal({
    log, topic: 'ingress.refused.v1', codec, logger: silentLogger, perMinute: options.perMinute, maxPending: options.maxPending, now: () => clock,
    metrics: { refusalNotJournaled: (reason, count = 1) => { dropped[reason] = (dropped[reason] ?? 0) + count; } },
  });
  const turn = () => new Promise((r) => setImmediate(r));
  return { journal, appended, dropped, release: () => release(), turn, advance: (ms: number) => { clock += ms; } };
}

test('each workflow notes at most its per-minute budget; another workflow has its own', async () => {
  const h = harness({ perMinute: 2 });
  for (let i = 0; i < 4; i++) h.journal.note(refusal('wf-a', i));
  h.journal.note(refusal('wf-b', 0));
  await h.turn();
  expect(h.appended).toHaveLength(1);
  expect(h.appended[0].map((r) => codec.decode('Refused', r.value).requestId)).toEqual(['r-wf-a-0', 'r-wf-a-1', 'r-wf-b-0']);
  expect(h.appended[0].every((r) => r.topic === 'ingress.refused.v1')).toBe(true);
  expect(h.dropped).toEqual({ 'rate-limited': 2 });
  h.release();
  h.advance(30_000); // half a minute: one token back
  h.journal.note(refusal('wf-a', 9));
  h.journal.note(refusal('wf-a', 10));
  await h.turn();
  expect(h.appended[1].map((r) => codec.decode('Refused', r.value).requestId)).toEqual(['r-wf-a-9']);
  h.release();
  await h.journal.close();
});

test('one append in flight: what arrives meanwhile waits in a bounded queue, then goes in one append', async () => {
  const h = harness({ perMinute: 1000, maxPending: 3 });
  h.journal.note(refusal('wf', 0));
  await h.turn();
  expect(h.appended).toHaveLength(1);
  for (let i = 1; i <= 5; i++) h.journal.note(refusal('wf', i));
  await h.turn();
  expect(h.appended).toHaveLength(1);
  expect(h.dropped).toEqual({ 'queue-full': 2 });
  h.release();
  await h.turn();
  expect(h.appended).toHaveLength(2);
  expect(h.appended[1]).toHaveLength(3);
  h.release();
  await h.journal.close();
});

test('a failing append is counted, never thrown; perMinute 0 notes nothing; close waits only so long', async () => {
  const failing = harness({ perMinute: 10, failing: true });
  failing.journal.note(refusal('wf', 0));
  failing.journal.note(refusal('wf', 1));
  await failing.turn();
  failing.release();
  await failing.turn();
  expect(failing.dropped).toEqual({ 'append-failed': 2 });

  const off = harness({ perMinute: 0 });
  off.journal.note(refusal('wf', 0));
  await off.turn();
  expect(off.appended).toEqual([]);

  const hanging = harness({ perMinute: 10 });
  hanging.journal.note(refusal('wf', 0));
  await hanging.turn();
  hanging.journal.note(refusal('wf', 1));
  await hanging.journal.close(50); // the append in flight never settles
  expect(hanging.dropped).toEqual({ 'append-failed': 1 });
});
