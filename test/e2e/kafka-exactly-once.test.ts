import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import {
  doublesTraced, drain, exactlyOnce, PipelineCluster, startLoad, until, workflowIdsCovering,
  type ExactlyOnceReport, type ExecutionWatch, type Load, type LoadResult, type OffsetWatch, type Role,
} from '../support/pipeline-cluster';
import { startKafkaClusterForTests, type KafkaClusterHandle } from '../support/servers';

/**
 * Exactly once on Kafka when stage processes misbehave, with every stage in processes of its own as in
 * production: a stage process frozen (SIGSTOP) past its session and thawed under load (the zombie that
 * still holds a transaction), `kill -9` and an immediate restart, replicas joining a busy group, and a broker
 * restart and a broker crash in a cluster of three. Each test asserts, over everything its load was answered:
 * - every request answered 200 has exactly one ExecutionRequested; no request id twice; none the test
 *   never got an answer with;
 * - the stage groups' committed offsets, read stable as the stages read them, never go backwards in any partition
 *   (polled every 100 ms), through the broker restart and crash too.
 * Waits are bounded and say what they waited for; nothing is asserted about durations.
 */
const partitions = 6;
const SHORT_SESSION = { KAFKA_SESSION_TIMEOUT_MS: '6000', KAFKA_HEARTBEAT_INTERVAL_MS: '1000' };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const note = (what: string, facts: unknown) => process.stderr.write(`[kafka-exactly-once] ${what}: ${JSON.stringify(facts)}\n`);

interface Verdict extends ExactlyOnceReport {
  offsetRegressions: Record<string, OffsetWatch['regressions']>;
  /** Stable reads of each group's offsets that answered: the regression check is only as good as their number. */
  offsetReads: Record<string, number>;
}

/** The report with the offset regressions of each watched group; compared as a whole so a failure shows every figure. */
function verdict(report: ExactlyOnceReport, watches: OffsetWatch[]): Verdict {
  return {
    ...report,
    offsetRegressions: Object.fromEntries(watches.map((w) => [w.group, w.regressions.slice(0, 20)])),
    offsetReads: Object.fromEntries(watches.map((w) => [w.group, w.polls])),
  };
}

function expectExactlyOnce(v: Verdict): void {
  expect(v).toEqual({
    ...v,
    doubles: 0, doubledRequests: 0, doubledExecutionIds: 0, missing: 0, unknown: 0,
    offsetRegressions: Object.fromEntries(Object.keys(v.offsetRegressions).map((g) => [g, []])),
  });
  expect(v.accepted).toBeGreaterThan(0);
  for (const reads of Object.values(v.offsetReads)) expect(reads).toBeGreaterThan(10);
}

const loadOf = (cluster: PipelineCluster, workflowIds: string[], max = 8_000): Load =>
  startLoad({ urls: () => cluster.receiverUrls(), workflowIds, ratePerSecond: 150, concurrency: 8, max });
const accepts = (load: LoadResult, n: number, patienceMs = 60_000) =>
  until(`${n} requests answered 200 (load: ${load.refused.length} refused, ${load.failed} failed)`, () => load.accepted.length, (a) => a >= n, patienceMs, 100);

interface Scenario {
  c: PipelineCluster;
  load: Load;
  executions: ExecutionWatch;
}

/**
 * One scenario: stage processes of their own with `roles`, offsets and executions watched, a bounded load over
 * `workflows`; then `act` misbehaves (and returns facts for the note), the load stops, the pipeline drains, and
 * exactly once is asserted over everything that was answered 200. Processes are stopped whatever happens.
 */
async function scenario(name: string, env: Record<string, string>, workflows: string[], roles: Role[], act: (s: Scenario) => Promise<Record<string, unknown>>, maxLoad?: number): Promise<void> {
  let cluster: PipelineCluster | null = null;
  let load: Load | null = null;
  try {
    cluster = await PipelineCluster.create(env, workflows);
    const c = cluster;
    await Promise.all(roles.map((role) => c.start(role)));
    await c.waitReady();
    const offsets = [c.watchOffsets('decoder'), c.watchOffsets('dispatcher')];
    const executions = await c.watchExecutions();
    load = loadOf(c, workflows, maxLoad);
    await accepts(load, 300);
    const facts = await act({ c, load, executions }).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; every process's output: ${c.saveOutputs(`kafka-exactly-once-${name.replace(/\W+/g, '-')}-failed`)}`, { cause: error });
    });
    const answered = await load.stop();
    await drain(c, answered, executions, { patienceMs: 150_000 });
    const v = verdict(exactlyOnce(answered, executions), offsets);
    note(name, { outputs: c.saveOutputs(`kafka-exactly-once-${name.replace(/\W+/g, '-')}`), ...v, refused: answered.refused.length, failed: answered.failed, ...facts });
    // Only for the note: a trace that cannot be read (the broker gone again) must not hide the verdict below.
    if (v.doubles > 0) note(`${name}, doubles traced through the topics`, await doublesTraced(c, executions).catch((error: unknown) => `not read: ${String(error)}`));
    expectExactlyOnce(v);
  } finally {
    await load?.stop();
    await cluster?.close();
  }
}

test('a decoder, then a dispatcher, frozen past their session and thawed under load: no record is processed twice and no committed offset goes back', async () => {
  const { env, cleanup } = backendEnv('real', { KAFKA_TOPIC_PARTITIONS: String(partitions), ...SHORT_SESSION });
  try {
    await scenario('zombie', env, workflowIdsCovering('wf-zombie-', partitions), ['receiver', 'receiver', 'decoder', 'decoder', 'dispatcher', 'dispatcher'], async ({ c, load, executions }) => {
      const [decoder] = c.byRole('decoder');
      c.freeze(decoder);
      await sleep(10_000); // past the 6 s session: the group gives its partitions to the other decoder
      c.thaw(decoder);
      await accepts(load, load.accepted.length + 300);
      // What the decoder's freeze did, roughly (doubles still on their way count for the dispatcher's).
      const afterDecoderFreeze = { doubles: exactlyOnce(load, executions).doubles };
      const [dispatcher] = c.byRole('dispatcher');
      c.freeze(dispatcher);
      await sleep(10_000);
      c.thaw(dispatcher);
      await accepts(load, load.accepted.length + 300);
      return { afterDecoderFreeze };
    });
  } finally {
    cleanup();
  }
}, 300_000);

test('kill -9 of a decoder and of a dispatcher, each restarted at once under load: nothing lost, nothing twice', async () => {
  const { env, cleanup } = backendEnv('real', { KAFKA_TOPIC_PARTITIONS: String(partitions), ...SHORT_SESSION });
  try {
    await scenario('kill -9', env, workflowIdsCovering('wf-kill-', partitions), ['receiver', 'decoder', 'decoder', 'dispatcher', 'dispatcher'], async ({ c, load }) => {
      for (const role of ['decoder', 'dispatcher'] as const) {
        const [member] = c.byRole(role);
        await c.kill(member, 'SIGKILL');
        await c.restart(member);
        await accepts(load, load.accepted.length + 400);
      }
      return {};
    });
  } finally {
    cleanup();
  }
}, 300_000);

test('RECORD_KEY=request: one busy workflow spread over the partitions while a 2nd and a 3rd decoder join under load: exactly once, handled by several decoders', async () => {
  const { env, cleanup } = backendEnv('real', { KAFKA_TOPIC_PARTITIONS: String(partitions), ...SHORT_SESSION, RECORD_KEY: 'request' });
  let spread: { partitionsWithRecords: number; decodersHoldingThem: number } | null = null;
  try {
    await scenario('rebalance', env, ['wf-busy'], ['receiver', 'decoder', 'dispatcher'], async ({ c, load }) => {
      const holders = c.watchAssignments('decoder');
      await c.start('decoder'); // joins: the group rebalances while the first decoder is busy
      await accepts(load, load.accepted.length + 300);
      await c.start('decoder');
      await accepts(load, load.accepted.length + 300);
      // Where the received records landed (the topics are this test's own: every record is one of its requests),
      // and which decoder processes hold those partitions now that all three are members (client ids name the pid).
      const received = await collectUntilQuiet(await c.log(), c.topics.received, 2_000);
      const used = [...new Set(received.map((r) => r.partition))].sort();
      const sharedBy = new Set(used.map((p) => holders.current.get(p)).filter((id) => id !== undefined));
      spread = { partitionsWithRecords: used.length, decodersHoldingThem: sharedBy.size };
      return { receivedPartitions: used, decodersHoldingThem: [...sharedBy], assignment: Object.fromEntries(holders.current) };
    });
    // Keyed by request id, the one workflow's records land on every partition, and all three decoders work on them.
    expect(spread).toEqual({ partitionsWithRecords: partitions, decodersHoldingThem: 3 });
  } finally {
    cleanup();
  }
}, 240_000);

describe('on a cluster of three brokers of its own', () => {
  let kafka: KafkaClusterHandle;
  beforeAll(async () => { kafka = await startKafkaClusterForTests({ nodes: 3 }); }, 120_000);
  afterAll(async () => { await kafka?.stop(); });

  // Replication factor 3 and min.insync.replicas 2, as production runs: one broker restarted in order, then, once
  // it caught up, another one crashed (SIGKILL of its JVM) and started again. Leaders, group and transaction
  // coordinators move to the brokers left, and back. A single broker restarted under load is not what this tests:
  // Kafka then skips or loses a transaction's markers now and then (docs/kafka.md, "A partition that waits for a
  // pending offset commit"), and the stages wait, as they must.
  test('broker restarts under load: every process is ready again while the stages process, and exactly once holds', async () => {
    const { env, cleanup } = backendEnv('real', {
      KAFKA_BROKERS: kafka.brokers, KAFKA_TOPIC_PARTITIONS: String(partitions), KAFKA_REPLICATION_FACTOR: '3', KAFKA_MIN_INSYNC_REPLICAS: '2', ...SHORT_SESSION,
    });
    try {
      await scenario('broker restarts', env, workflowIdsCovering('wf-restart-', partitions), ['receiver', 'decoder', 'decoder', 'dispatcher'], async ({ c, load, executions }) => {
        const rounds: Record<string, number | boolean>[] = [];
        const restarts = [{ node: kafka.nodes[0], how: { downMs: 3_000 } }, { node: kafka.nodes[1], how: { hard: true, downMs: 3_000 } }];
        for (const [round, { node, how }] of restarts.entries()) {
          const t0 = Date.now();
          const since = () => Date.now() - t0;
          const steps: Record<string, number | boolean> = { broker: node.nodeId, crash: Boolean(how.hard) };
          await node.restart(how);
          steps.brokerBackMs = since();
          // Ready again while the load goes on, and the stages process what comes after the restart.
          await c.waitReady(90_000);
          steps.readyMs = since();
          const executedBefore = executions.records;
          await accepts(load, load.accepted.length + 200, 90_000);
          steps.acceptedMs = since();
          await until(`executions after broker restart ${round + 1}`, () => executions.records, (n) => n >= executedBefore + 200, 90_000);
          steps.executedMs = since();
          // The next broker goes down only once this one has caught up: two down at once is below min.insync.replicas.
          await kafka.inSync(90_000);
          steps.inSyncMs = since();
          rounds.push(steps);
        }
        return { rounds, readerErrors: executions.readErrors };
      }, 20_000);
    } finally {
      cleanup();
    }
  }, 360_000);
});
