import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { EventLog, StageHandle, StageOptions } from '../../services/platform/log/event-log';
import { startTogether } from '../../services/platform/log/start-together';
import { pipelineTopics } from '../../services/platform/log/topics';
import { silentLogger } from '../../services/platform/logger/logger';
import type { JournalStore } from '../../services/platform/registry/journal';
import { journalInputs, startJournal } from '../../services/journal/journal-stage';

/**
 * Stages start together (start-together.ts): on Kafka each start waits for its consumer group's join, and one
 * after another those waits added up. An EventLog whose runStage answers only when the test says so shows what
 * is called before what, and what a failed start leaves running.
 */
const codec = defaultAvroCodec();
const topics = pipelineTopics(undefined);
const queues = ['q1', 'q2'];
const journal = { upsert: async () => undefined, prune: async () => 0 } as unknown as JournalStore;

interface PendingStart {
  topic: string;
  started(): void;
  failed(error: Error): void;
  /** Whether the handle this start returned has been stopped. */
  stopped: boolean;
}

function heldStarts(stopOrder: string[] = []): { log: EventLog; starts: PendingStart[] } {
  const starts: PendingStart[] = [];
  const log = {
    runStage(options: StageOptions): Promise<StageHandle> {
      return new Promise((resolve, reject) => {
        const start: PendingStart = {
          topic: options.topic,
          stopped: false,
          started: () => resolve({ stop: async () => { start.stopped = true; stopOrder.push(options.topic); }, notReady: () => null }),
          failed: reject,
        };
        starts.push(start);
      });
    },
  } as unknown as EventLog;
  return { log, starts };
}

/** Lets every promise chain that can move on do so (the fake's starts settle only when told). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

const startingJournal = (log: EventLog) => startJournal({ log, topics, codec, journal, logger: silentLogger, queues, retentionDays: 30, pruneEveryMs: 3_600_000 });

test('the journal calls runStage for every input before any start has answered, and stops them in input order', async () => {
  const stopOrder: string[] = [];
  const { log, starts } = heldStarts(stopOrder);
  const inputs = journalInputs(topics, queues).map((i) => i.topic);
  expect(inputs.length).toBeGreaterThan(3);
  let resolved = false;
  const journalStarting = startingJournal(log).then((handle) => { resolved = true; return handle; });
  await settle();
  expect(starts.map((s) => s.topic)).toEqual(inputs);
  expect(resolved).toBe(false);
  // Answered out of order: the stage is started once the last one has.
  for (const s of [...starts].reverse()) s.started();
  const stage = await journalStarting;
  await stage.stop();
  expect(stopOrder).toEqual(inputs);
});

test('an input that cannot start stops those started and, once it has started, the one still starting; its error is thrown', async () => {
  const { log, starts } = heldStarts();
  const outcome = startingJournal(log).then(() => null, (error: unknown) => error);
  await settle();
  const [first, failing, late, ...rest] = starts;
  first.started();
  for (const s of rest) s.started();
  const refused = new Error('kafka stage journal-refused on refused could not start');
  failing.failed(refused);
  await settle();
  // Still waiting for the one starting: it is not left running behind a rejected start.
  let settledYet = false;
  void outcome.then(() => { settledYet = true; });
  await settle();
  expect(settledYet).toBe(false);
  late.started();
  expect(await outcome).toBe(refused);
  expect(starts.filter((s) => s !== failing).map((s) => [s.topic, s.stopped])).toEqual(starts.filter((s) => s !== failing).map((s) => [s.topic, true]));
});

test('of several failed starts, the first in the order given is thrown, whichever failed first; a start that throws at once is a failure like the others', async () => {
  const { log, starts } = heldStarts();
  const run = (topic: string) => () => log.runStage({ group: 'g', topic, handle: async () => [] });
  const thrown = new Error('thrown at once');
  const outcome = startTogether([run('a'), run('b'), () => { throw thrown; }, run('c')]).then(() => null, (error: unknown) => error);
  await settle();
  expect(starts.map((s) => s.topic)).toEqual(['a', 'b', 'c']);
  starts[2].failed(new Error('c failed first'));
  starts[1].failed(new Error('b failed second'));
  starts[0].started();
  expect(await outcome).toEqual(new Error('b failed second'));
  expect(starts[0].stopped).toBe(true);
});
