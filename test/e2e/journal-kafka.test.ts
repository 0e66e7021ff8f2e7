import { Kafka, logLevel } from 'kafkajs';
import { openBackends, type Backends } from '../../services/cli/backends';
import { startServices, type RunningServices } from '../../services/cli/start';
import { journalInputs } from '../../services/journal/journal-stage';
import { loadConfig, type Config } from '../../services/platform/config/config';
import { silentLogger } from '../../services/platform/logger/logger';
import { pipelineTopics } from '../../services/platform/log/topics';
import type { JournalEntry } from '../../services/platform/registry/journal';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { backendEnv } from '../support/app';
import { as2Headers } from '../support/as2-client';
import { createPeer } from '../support/as2-peer';
import { runCli, STAGE_WORKER_CRASH, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { collectUntilQuiet } from '../support/log-reads';
import { mdnOutcomes, putAsyncMdnWorkflow, startMdnReceiver } from '../support/mdn-receiver';

/**
 * The journal stage on Kafka writes to Cosmos DB outside the log's transaction: a crash between the write
 * and the commit delivers records again. Here the journal runs as a process of its own, is killed with
 * SIGKILL while it works and restarted, and then every journal group is rewound to the start of its topics
 * (every record delivered a second time); the journal must still hold exactly one entry per thing that happened.
 * Then the mdn and journal stages, in a process of their own, meet a record each that ends their worker thread
 * every time: their crash guards convict both on Kafka, and what came after is delivered and journaled once.
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
  // An asynchronous MDN is due at once: the decoder here writes the deliveries.
  ({ env, cleanup } = backendEnv('real', { WORKFLOW_CACHE_MS: '0', AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms' }));
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

const codec = defaultAvroCodec();
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

test('on Kafka, a delivery that ends the mdn worker every time and a record that ends the journal\'s are convicted; what came after is delivered and journaled once', async () => {
  if (journal) { journal.child.kill('SIGTERM'); await waitForExit(journal.child); journal = null; }
  const mdnPoison = 'poison-pill-4e81';
  const journalPoison = 'poison-pill-a7c3';
  const peer = createPeer();
  const mdns = await startMdnReceiver();
  try {
    expect(await putAsyncMdnWorkflow(env, await peer.party('receiver'), mdns)).toBe(true);
    // Calls from loopback are refused (403) and journaled as refusals, which the journal alone reads: its pill is
    // the refusal whose entry names the workflow that holds the text, and whose upsert to Cosmos DB holds it.
    const walled = { options: { ipAllowList: ['203.0.113.0/24'] } };
    for (const id of ['wf-walled', `wf-walled-${journalPoison}`]) await backends.registry.workflows.put({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: walled }] });
    const refused = async (workflowId: string) => {
      const res = await fetch(`http://127.0.0.1:${pipeline!.port}/hook/${workflowId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(403);
      return res.headers.get('x-request-id')!;
    };
    // A plain message from an unpinned partner, with an unsigned receipt asked for asynchronously at `inbox`.
    const sent = async (inbox: string) => {
      const headers = as2Headers({ 'Disposition-Notification-Options': null, 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/mdn/${inbox}`, 'Content-Type': 'application/edi-x12' });
      const res = await fetch(`http://127.0.0.1:${pipeline!.port}/hook/wf-async`, { method: 'POST', headers, body: 'ISA*00*~ST*850*0001~SE*2*0001~' });
      expect(res.status).toBe(200);
      return res.headers.get('x-request-id')!;
    };
    // With a receiver beside them (unused), the stages run in a worker thread, which the hooks end and the process
    // starts again: as under `npm start`. Alone, they would run on the main thread, for a supervisor to restart.
    const stages = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_POST_TO: mdnPoison, CRASH_STAGE_WORKER_WRITE_ON: journalPoison }, ['--services', 'receiver,mdn,journal'], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    // The output so far as log lines: only whole lines (the child may be writing the last one), and only JSON ones.
    const logLines = () => {
      const text = stages.output();
      const whole = text.endsWith('\n') ? text : text.slice(0, text.lastIndexOf('\n') + 1);
      return whole.split('\n').flatMap((l) => {
        if (!l.startsWith('{')) return [];
        try { return [JSON.parse(l) as { msg: string; stage?: string; event?: string; topic?: string }]; } catch { return []; }
      });
    };
    try {
      // The journal's pill first, until it is skipped and that skip committed: a pill ending the worker (the mdn and
      // journal stages share it) after the POST of `/mdn/after` and before its commit would send that MDN again, as
      // MDN delivery is at least once. The mdn pill then comes before the MDN after it on their partition (keyed by
      // workflow), whose deliveries are attempted in order: the pill's attempt ends the worker before that POST,
      // and once the pill is convicted nothing ends it any more.
      const topics = pipelineTopics(config.topicPrefix);
      const journalPill = await refused(`wf-walled-${journalPoison}`);
      await until('the journal to skip its pill', async () => logLines().some((l) => l.event === 'journal.stage-crashed'), (seen) => seen, 90_000);
      await until('the journal to commit past its pill', () => backends.log.consumerLag(topics.group('journal', topics.refused), topics.refused), (l) => l === 0, 90_000);
      const mdnPill = await sent(mdnPoison);
      const mdnAfter = await sent('after');
      const journalAfter = await refused('wf-walled');
      await mdns.seen(1);
      // The final outcomes, waited for; then every outcome of each request, read until the topic is quiet.
      await mdnOutcomes(backends.log, topics.mdnOutcomes, mdnAfter);
      await mdnOutcomes(backends.log, topics.mdnOutcomes, mdnPill);
      const outcomes = (await collectUntilQuiet(backends.log, topics.mdnOutcomes, 2_000)).map((r) => codec.decode('MdnOutcome', r.value));
      const outcomesOf = (requestId: string) => outcomes.filter((o) => o.requestId === requestId);
      expect(outcomesOf(mdnAfter).map((o) => o.outcome)).toEqual(['delivered']);
      // The pill's outcome: dead-lettered once, with its one dead letter, never attempted again.
      expect(outcomesOf(mdnPill).map((o) => [o.outcome, o.attempts, o.status])).toEqual([['dead_lettered', 0, null]]);
      const letters = (await collectUntilQuiet(backends.log, topics.deadLetter, 2_000)).map((r) => codec.decode('DeadLetter', r.value));
      const mdnLetters = letters.filter((d) => d.stage === 'mdn').map((d) => [d.stage, d.errorCode, codec.decode('MdnDelivery', d.source.value).requestId]);
      expect(mdnLetters.filter(([, , requestId]) => requestId === mdnPill || requestId === mdnAfter)).toEqual([['mdn', 'stage-crashed', mdnPill]]);
      const journeyOf = (requestId: string, done: (kinds: string[]) => boolean) => until(`the journal of ${requestId}`, async () => (await backends.registry.journal.request(requestId)).map((e) => e.kind), done, 90_000);
      expect(await journeyOf(journalAfter, (k) => k.length > 0)).toEqual(['refused']);
      // The mdn pill's request reads what became of its MDN, as a given-up one would, beside its dead letter.
      const pillJourney = await journeyOf(mdnPill, (k) => k.includes('mdn-dead-lettered') && k.includes('dead-lettered'));
      expect(pillJourney.filter((k) => k.startsWith('mdn-') || k === 'dead-lettered').sort()).toEqual(['dead-lettered', 'mdn-dead-lettered']);
      expect(await backends.registry.journal.request(journalPill)).toEqual([]);
      // Once each: the MDN after the pill went out once, and nothing else did.
      expect(mdns.posts.map((p) => p.path)).toEqual(['/mdn/after']);
      const lines = logLines();
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'journal skipped a record that ended the process handling it', event: 'journal.stage-crashed' }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'as2.mdn-dead-lettered' }));
    } finally {
      stages.child.kill('SIGTERM');
      await waitForExit(stages.child);
    }
  } finally {
    await mdns.close();
    peer.cleanup();
  }
}, 120_000);
