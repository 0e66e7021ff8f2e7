import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openRegistry, openStore } from '../../services/cli/backends';
import { loadConfig } from '../../services/platform/config/config';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { replayOf } from '../../services/platform/log/replay-marking';
import { pipelineTopics } from '../../services/platform/log/topics';
import { readObject, type ObjectStore } from '../../services/platform/store/object-store';
import { ADMIN_TOKENS, FULL_TOKEN } from '../support/admin-api';
import { backendEnv } from '../support/app';
import { collectUntilQuiet } from '../support/log-reads';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { ExecutionWatch, until } from '../support/pipeline-cluster';
import { getFreePort } from '../support/servers';

/**
 * The replay ledger shared through the object store, with real processes on Kafka and Azurite: two services on
 * two machines (two DATA_DIRs), one Kafka cluster, one topic prefix, one blob container. Requests are
 * dead-lettered by the decoders of both (`trigger-missing`: their workflow's trigger node renamed), the workflow
 * is fixed, and both management APIs are asked at the same moment to replay every dead letter. Each request must
 * be requested exactly once (ExecutionRequested with `replayOf`, read read_committed), the two jobs' `replayed`
 * must add up to the requests and each job's `duplicates` to what the other replayed, and the ledger's objects
 * must claim each request once. Then again with one of them killed (`kill -9`) mid-replay, restarted on its
 * DATA_DIR and its job resumed while the other replays.
 *
 * Two containers (two ledgers, as each DATA_DIR had its own file before the ledger moved to the object store)
 * fail it: both jobs replay every request.
 */
const N = 300;
const codec = defaultAvroCodec();
const WF = 'wf-shared-ledger';
const note = (what: string, facts: unknown) => process.stderr.write(`[replay-kafka-shared-ledger] ${what}: ${JSON.stringify(facts)}\n`);

interface Service { name: string; env: Record<string, string>; admin: string; proc: ServiceProcess }

interface Setup {
  /** The env of the first machine; the second differs in DATA_DIR (and ADMIN_PORT). */
  env: Record<string, string>;
  requestIds: string[];
  services: Service[];
  executions: ExecutionWatch;
  reader: KafkaEventLog;
  /** The shared container, where the test reads the ledger. */
  store: ObjectStore;
  cleanup(): Promise<void>;
}

async function api(base: string, method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${route}`, { method, headers: { authorization: `Bearer ${FULL_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const putWorkflow = async (env: Record<string, string>, node: string) => {
  const registry = await openRegistry(loadConfig(env));
  try { await registry.workflows.put({ id: WF, active: true, nodes: [{ name: node, type: 'webhook' }] }); } finally { await registry.close(); }
};

/** `ingress start --services decoder,dispatcher` with a management API of its own, on `env`'s DATA_DIR. */
async function startService(name: string, env: Record<string, string>): Promise<Service> {
  const port = await getFreePort();
  const serviceEnv = { ...env, ADMIN_PORT: String(port) };
  return { name, env: serviceEnv, admin: `http://127.0.0.1:${port}`, proc: await startServiceProcess(serviceEnv, ['--services', 'decoder,dispatcher']) };
}

async function stop(service: Service, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (service.proc.child.exitCode !== null || service.proc.child.signalCode !== null) return;
  service.proc.child.kill(signal);
  await waitForExit(service.proc.child);
}

/**
 * `n` requests accepted by a receiver, then dead-lettered (`trigger-missing`) by the decoders of two services,
 * each on a DATA_DIR of its own, with the same topic prefix, blob container and admin tokens; then the workflow is
 * fixed. The services keep running, and the execution queue is watched from its beginning.
 */
async function deadLettered(n: number): Promise<Setup> {
  const { env, cleanup } = backendEnv('real', { ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0', LOG_LEVEL: 'info' });
  const otherDataDir = mkdtempSync(path.join(tmpdir(), 'ingress-app-'));
  const envs = [env, { ...env, DATA_DIR: otherDataDir }];
  const services: Service[] = [];
  let reader: KafkaEventLog | null = null;
  let executions: ExecutionWatch | null = null;
  let store: ObjectStore | null = null;
  const close = async () => {
    for (const s of services) await stop(s);
    await executions?.stop();
    await reader?.close();
    await store?.close();
    cleanup();
    rmSync(otherDataDir, { recursive: true, force: true });
  };
  try {
    const applied = await runCli(['topics', 'apply'], env);
    if (applied.code !== 0) throw new Error(`ingress topics apply failed: ${applied.stderr}`);
    await putWorkflow(env, 'Hook');
    const receiver = await startServiceProcess({ ...env, LOG_LEVEL: 'warn' }, ['--services', 'receiver']);
    const requestIds: string[] = [];
    try {
      await Promise.all(Array.from({ length: 8 }, async (_, worker) => {
        for (let i = worker; i < n; i += 8) {
          const res = await fetch(`${receiver.baseUrl}/hook/${WF}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) });
          expect(res.status).toBe(200);
          requestIds.push(res.headers.get('x-request-id')!);
        }
      }));
    } finally {
      receiver.child.kill('SIGTERM');
      await waitForExit(receiver.child);
    }
    await putWorkflow(env, 'Renamed'); // the node the requests came through is gone: the decoders give up on each
    services.push(...await Promise.all(envs.map((e, i) => startService(`service-${'ab'[i]}`, e))));
    await until(`${n} dead letters`, async () => (await api(services[0].admin, 'GET', `/api/v1/dead-letters?workflow=${WF}&limit=1`)).body.total, (total) => total === n, 90_000, 500);
    await putWorkflow(env, 'Hook'); // the fix
    reader = await openKafkaLog({ brokers: env.KAFKA_BROKERS.split(','), clientId: 'shared-ledger-reader' });
    executions = new ExecutionWatch(reader, pipelineTopics(env.INGRESS_TOPIC_PREFIX).executions);
    store = await openStore(loadConfig(env));
    return { env, requestIds, services, executions, reader, store, cleanup: close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Whether the job's checkpoint (DATA_DIR/replay/<id>.json) announces a batch it appends (`appending`). */
function announced(service: Service, id: string): boolean {
  try { return JSON.parse(readFileSync(path.join(service.env.DATA_DIR, 'replay', `${id}.json`), 'utf8')).appending !== undefined; } catch { return false; }
}

/** Poll the job on `service` until it is no longer running. */
async function finished(service: Service, id: string, patienceMs = 90_000): Promise<any> {
  return until(`replay ${id} on ${service.name} to finish`, async () => (await api(service.admin, 'GET', `/api/v1/replays/${id}`)).body, (job) => job?.state !== 'running', patienceMs, 200);
}

/** Every request has an execution and none came for `quietMs` (so a second one on its way is counted too). */
async function executed(setup: Setup, quietMs = 4_000): Promise<void> {
  await until('an execution for every request, then a quiet execution queue', () => ({ missing: setup.executions.missing(setup.requestIds).length, quietForMs: Date.now() - setup.executions.lastRecordAt }), (s) => s.missing === 0 && s.quietForMs >= quietMs, 60_000, 250);
}

/** The ledger's objects in the shared container: for each original, the `<replay> <letter>` of every claim of it. */
async function ledgerClaims(setup: Setup): Promise<{ objects: number; replays: Set<string>; originals: Map<string, string[]> }> {
  const prefix = `replay/ledger/${pipelineTopics(setup.env.INGRESS_TOPIC_PREFIX).deadLetter}/`;
  const originals = new Map<string, string[]>();
  const replays = new Set<string>();
  let objects = 0;
  for await (const name of setup.store.list(prefix)) {
    objects++;
    const batch = JSON.parse((await readObject(setup.store, name)).toString('utf8')) as { replay: string; claims: [string, string][] };
    replays.add(batch.replay);
    for (const [original, letter] of batch.claims) originals.set(original, [...(originals.get(original) ?? []), `${batch.replay} ${letter}`]);
  }
  return { objects, replays, originals };
}

/**
 * Each request requested exactly once, by a replay (`replayOf` set); none this test did not send. The queue is read
 * again from its beginning (read_committed) for the marks: the watch only counted.
 */
async function expectExecutedOnce(setup: Setup): Promise<void> {
  const all = (await collectUntilQuiet(setup.reader, pipelineTopics(setup.env.INGRESS_TOPIC_PREFIX).executions, 2_000)).map((r) => codec.decode('ExecutionRequested', r.value));
  const perRequest = new Map<string, number>();
  for (const e of all) perRequest.set(e.requestId, (perRequest.get(e.requestId) ?? 0) + 1);
  const twice = [...perRequest].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`);
  if (twice.length > 0) note('requests requested more than once', { count: twice.length, of: setup.requestIds.length, first: twice.slice(0, 5) });
  const sent = new Set(setup.requestIds);
  const missing = setup.requestIds.filter((id) => !perRequest.has(id));
  const unknown = [...perRequest.keys()].filter((id) => !sent.has(id));
  const notReplays = all.filter((e) => e.replayOf === null).map((e) => e.requestId);
  // Counts, and the first few of each: a failure names them without listing hundreds.
  const some = (ids: string[]) => ({ count: ids.length, first: ids.slice(0, 5) });
  expect({ missing: some(missing), twice: some(twice), unknown: some(unknown), notReplays: some(notReplays) })
    .toEqual({ missing: some([]), twice: some([]), unknown: some([]), notReplays: some([]) });
  // The watch, read alongside, saw the same.
  expect(setup.executions.records).toBe(all.length);
  // And at the source: one copy per request on the received topic (a resumed run that appended again what had landed would show here first).
  const copies = new Map<string, number>();
  for (const { requestId } of await copiesOf(setup)) copies.set(requestId, (copies.get(requestId) ?? 0) + 1);
  const copiedTwice = [...copies].filter(([, n]) => n > 1).map(([id, n]) => `${id} x${n}`);
  expect({ copied: copies.size, twice: some(copiedTwice) }).toEqual({ copied: setup.requestIds.length, twice: some([]) });
}

/** The replayed copies on the received topic (read_committed), with the time the log took each. */
async function copiesOf(setup: Setup): Promise<{ requestId: string; timestamp: number }[]> {
  const received = await collectUntilQuiet(setup.reader, pipelineTopics(setup.env.INGRESS_TOPIC_PREFIX).received, 2_000);
  return received.filter((r) => replayOf(r.headers) !== null).map((r) => ({ requestId: codec.decode('Received', r.value).requestId, timestamp: r.timestamp }));
}

/**
 * What two complete jobs must leave: each request requested once; their `replayed` adding up to the requests, and
 * what each did not replay counted a duplicate (each read every letter); the ledger claiming each request once,
 * by the job that replayed it.
 */
async function expectReplayedOnce(setup: Setup, jobs: any[]): Promise<void> {
  for (const job of jobs) expect(job).toMatchObject({ kind: 'dead-letters', state: 'complete', error: null, unrecorded: 0 });
  await expectExecutedOnce(setup);
  expect(jobs[0].replayed + jobs[1].replayed).toBe(N);
  expect(jobs[0].duplicates).toBe(jobs[1].replayed);
  expect(jobs[1].duplicates).toBe(jobs[0].replayed);
  const ledger = await ledgerClaims(setup);
  expect(new Set(ledger.originals.keys())).toEqual(new Set(setup.requestIds.map((id) => `request ${id}`)));
  expect([...ledger.originals].filter(([, claims]) => claims.length > 1)).toEqual([]);
  const claimedBy = (id: string) => [...ledger.originals.values()].filter(([claim]) => claim.startsWith(`${id} `)).length;
  note('ledger', { objects: ledger.objects, claims: ledger.originals.size, byJob: jobs.map((j) => claimedBy(j.id)) });
  expect(jobs.map((j) => claimedBy(j.id))).toEqual(jobs.map((j) => j.replayed));
}

const jobFacts = (j: any) => ({ id: j.id, state: j.state, replayed: j.replayed, duplicates: j.duplicates, unrecorded: j.unrecorded, skipped: j.skipped, error: j.error });

describe('dead-letter replays from two services with different DATA_DIRs, on Kafka with one blob container', () => {
  test('both asked at the same moment: each request executed once, the jobs\' counts add up, the ledger claims each request once', async () => {
    const setup = await deadLettered(N);
    try {
      const [a, b] = setup.services;
      const asked = await Promise.all([a, b].map((s) => api(s.admin, 'POST', '/api/v1/dead-letters/replay', {})));
      for (const answer of asked) expect(answer.status).toBe(202);
      const jobs = await Promise.all([a, b].map((s, i) => finished(s, asked[i].body.id)));
      await executed(setup);
      note('jobs', jobs.map(jobFacts));
      await expectReplayedOnce(setup, jobs);
    } finally {
      await setup.cleanup();
    }
  }, 120_000);

  /**
   * The second service killed (SIGKILL) as soon as its checkpoint announces its job's first batch: its claims are
   * in the ledger, its copies' append under way or just done. The first service, asked then, counts those requests
   * duplicates and replays the rest. The killed one, restarted on its DATA_DIR and resumed, first waits
   * REPLAY_LANDING_WINDOW_MS from the announcement (5 s here, 60 s by default: one broker has no follower to wait
   * for, and the copies go to a topic no stage writes in transactions), then looks for the copies that landed and appends the
   * rest, none twice. As it happens the kill comes before the append commits (the note counts the killed job's
   * copies from before the kill: 0 in every run so far), so the resumed run finds none and appends them all; a
   * kill between the append and the checkpoint's save is too short a window to aim at from outside. So is the one
   * between the ledger's commit and the announcement (an end-offset query): watching the ledger, the kill landed
   * after the announcement anyway.
   */
  test('one killed -9 as its checkpoint announces its first batch, restarted and resumed: each request executed once', async () => {
    const setup = await deadLettered(N);
    try {
      const [a, b] = setup.services;
      const askedB = await api(b.admin, 'POST', '/api/v1/dead-letters/replay', {});
      expect(askedB.status).toBe(202);
      await until(`${askedB.body.id}'s checkpoint to announce a batch`, () => announced(b, askedB.body.id), (yes) => yes, 30_000, 5);
      // The other asked as the first is killed, so that the killed one's claims are in the ledger first (asked
      // together, either may commit everything first, and the one to kill then has nothing left to claim).
      const [askedA] = await Promise.all([api(a.admin, 'POST', '/api/v1/dead-letters/replay', {}), stop(b, 'SIGKILL')]);
      const killedAt = Date.now();
      expect(askedA.status).toBe(202);
      const atKill = { ledgerReplays: [...(await ledgerClaims(setup)).replays], announced: announced(b, askedB.body.id) };
      const jobA = await finished(a, askedA.body.id);
      b.proc = await startServiceProcess({ ...b.env, REPLAY_LANDING_WINDOW_MS: '5000' }, ['--services', 'decoder,dispatcher']);
      const interrupted = (await api(b.admin, 'GET', `/api/v1/replays/${askedB.body.id}`)).body;
      expect(interrupted).toMatchObject({ state: 'interrupted' });
      const resumed = await api(b.admin, 'POST', `/api/v1/replays/${askedB.body.id}/resume`);
      expect(resumed.status).toBe(202);
      const t0 = Date.now();
      const jobB = await finished(b, askedB.body.id, 120_000);
      note('kill', { atKill, interrupted: jobFacts(interrupted), resumedRunMs: Date.now() - t0 });
      await executed(setup);
      note('jobs', [jobA, jobB].map(jobFacts));
      await expectReplayedOnce(setup, [jobA, jobB]);
      // For the note: whether the killed run's copies had landed (the resumed run found them) or not (it appended them).
      const ledger = await ledgerClaims(setup);
      const claimedByB = new Set([...ledger.originals].filter(([, [claim]]) => claim.startsWith(`${askedB.body.id} `)).map(([original]) => original));
      const copiesOfB = (await copiesOf(setup)).filter((c) => claimedByB.has(`request ${c.requestId}`));
      note('the killed job\'s copies', { beforeTheKill: copiesOfB.filter((c) => c.timestamp < killedAt).length, byTheResumedRun: copiesOfB.filter((c) => c.timestamp >= t0).length });
    } finally {
      await setup.cleanup();
    }
  }, 150_000);
});
