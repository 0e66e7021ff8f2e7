import { Kafka, logLevel } from 'kafkajs';
import { openBackends, type Backends } from '../../services/cli/backends';
import { startServices, type RunningServices } from '../../services/cli/start';
import { journalInputs } from '../../services/journal/journal-stage';
import { loadConfig, type Config } from '../../services/platform/config/config';
import { silentLogger } from '../../services/platform/logger/logger';
import { pipelineTopics } from '../../services/platform/log/topics';
import type { JournalEntry } from '../../services/platform/registry/journal';
import { backendEnv } from '../support/app';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';

/**
 * The journal stage on Kafka writes to Cosmos DB outside the log's transaction: a crash between the write
 * and the commit delivers records again. Here the journal runs as a process of its own, is killed with
 * SIGKILL while it works and restarted, and then every journal group is rewound to the start of its topics
 * (every record delivered a second time); the journal must still hold exactly one entry per thing that happened.
 */
const REQUESTS = 40;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let env: Record<string, string>;
let cleanup: () => void;
let config: Config;
let backends: Backends;
let pipeline: RunningServices | null = null;
let journal: ServiceProcess | null = null;

beforeAll(async () => {
  ({ env, cleanup } = backendEnv('real', { WORKFLOW_CACHE_MS: '0' }));
  expect((await runCli(['topics', 'apply'], env)).code).toBe(0);
  config = loadConfig(env);
  backends = await openBackends(config, silentLogger);
  await backends.registry.workflows.put({ id: 'wf-kj', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  pipeline = await startServices(config, backends, ['receiver', 'decoder', 'dispatcher'], silentLogger);
}, 60_000);
afterAll(async () => {
  if (journal) { journal.child.kill('SIGKILL'); await waitForExit(journal.child); }
  await pipeline?.stop();
  await backends?.close();
  cleanup?.();
});

const entries = () => backends.registry.journal.search({ workflowId: 'wf-kj', limit: 1000 });
async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, patienceMs = 45_000): Promise<T> {
  const deadline = Date.now() + patienceMs;
  let value = await read();
  while (!done(value)) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what} (last: ${JSON.stringify(value).slice(0, 300)})`);
    await sleep(200);
    value = await read();
  }
  return value;
}
const inputs = () => journalInputs(pipelineTopics(config.topicPrefix), [...new Set(Object.values(config.executionQueues))]);
const lag = async () => (await Promise.all(inputs().map(({ group, topic }) => backends.log.consumerLag(group, topic)))).reduce((a, b) => a + b, 0);

test('a journal killed mid-work and restarted, then fed everything again, holds each entry once', async () => {
  const requestIds: string[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const res = await fetch(`http://127.0.0.1:${pipeline!.port}/hook/wf-kj`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"n":${i}}` });
    expect(res.status).toBe(200);
    requestIds.push(res.headers.get('x-request-id')!);
  }
  const expected = REQUESTS * 3; // received, decoded, execution-requested

  journal = await startServiceProcess(env, ['--services', 'journal']);
  await until('the journal to start writing', entries, (e) => e.length > 0);
  journal.child.kill('SIGKILL');
  await waitForExit(journal.child);
  journal = await startServiceProcess(env, ['--services', 'journal']);
  await until(`${expected} entries`, entries, (e) => e.length >= expected);
  await until('the journal groups to commit everything', lag, (l) => l === 0);
  journal.child.kill('SIGTERM');
  await waitForExit(journal.child);
  journal = null;

  // Every record again: what a crash after the registry write and before the commit does, for all of them at once.
  const admin = new Kafka({ brokers: env.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (const { group, topic } of inputs()) await admin.resetOffsets({ groupId: group, topic, earliest: true });
  } finally {
    await admin.disconnect();
  }
  expect(await lag()).toBeGreaterThanOrEqual(expected);
  journal = await startServiceProcess(env, ['--services', 'journal']);
  await until('the rewound journal groups to commit everything again', lag, (l) => l === 0);

  const all: JournalEntry[] = await entries();
  expect(all).toHaveLength(expected);
  expect(new Set(all.map((e) => e.id)).size).toBe(expected);
  for (const id of requestIds) {
    const journey = await backends.registry.journal.request(id);
    expect(journey.map((e) => e.kind)).toEqual(['received', 'decoded', 'execution-requested']);
  }
}, 90_000);
