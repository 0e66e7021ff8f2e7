import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, statSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { TOPIC_NAMES } from '../../services/platform/log/topics';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { readObject } from '../../services/platform/store/object-store';
import { ADMIN_TOKENS, FULL_TOKEN } from '../support/admin-api';
import { backendEnv } from '../support/app';
import { CLI, runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { freePort } from '../support/free-port';
import { collect, collectUntilQuiet } from '../support/log-reads';

/**
 * Dead-letter replays through `kill -9`, with real processes on the embedded backends: requests dead-lettered
 * (`trigger-missing`, their workflow's trigger node renamed), the workflow fixed, then a replay killed at chosen
 * moments (just after the replay ledger's commit, just after the copies' append, or at a random time) and
 * resumed until it completes, through the service (its job, resumed after each restart) and directly (the
 * command run again with the service stopped). Then every request must have its execution, the ledger must
 * name each request once, and the job's counts must add up.
 *
 * Each request must be requested exactly once, whatever moment a kill meets: the last test aims its kill at the
 * one window a resumed run must see through, just after the copies' append and before the checkpoint's save
 * (refeed.ts: the batch is announced in the checkpoint first, and the resumed run finds the copies that landed).
 */
const WF = 'wf-chaos';
const codec = defaultAvroCodec();
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A seeded generator, so a failing run can be repeated (CHAOS_SEED). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (s + 0x6d2b79f5) >>> 0; let t = s; t = Math.imul(t ^ (t >>> 15), t | 1); t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}

interface Setup { env: Record<string, string>; cleanup(): void; requestIds: string[]; letters: number }

const putWorkflow = async (env: Record<string, string>, node: string) => {
  const file = path.join(env.DATA_DIR, `${WF}.json`);
  writeFileSync(file, JSON.stringify({ id: WF, active: true, nodes: [{ name: node, type: 'webhook' }] }));
  const put = await runCli(['workflows', 'put', file], env);
  expect(put.code).toBe(0);
};

const stop = async (service: ServiceProcess) => { service.child.kill('SIGTERM'); await waitForExit(service.child); };

/** Waits (reading the log read-only beside the service) until the dead-letter topic holds `count` letters. */
async function lettersOnLog(env: Record<string, string>, count: number): Promise<void> {
  const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
  try { await collect(log, TOPIC_NAMES.deadLetter, count, 60_000); } finally { await log.close(); }
}

/**
 * `n` requests accepted and dead-lettered by the decoder (`trigger-missing`). With `twice`, a replay run before the
 * fix (no kills) leaves a second letter per request, its copy's (`replayOf` set). Then the workflow is fixed.
 */
async function deadLettered(n: number, twice: boolean, extra: Record<string, string> = {}): Promise<Setup> {
  const { env, cleanup } = backendEnv('embedded', { WORKFLOW_CACHE_MS: '0', ...extra });
  await putWorkflow(env, 'Hook');
  const receiver = await startServiceProcess(env, ['--services', 'receiver']);
  const requestIds: string[] = [];
  await Promise.all(Array.from({ length: 8 }, async (_, worker) => {
    for (let i = worker; i < n; i += 8) {
      const res = await fetch(`${receiver.baseUrl}/hook/${WF}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) });
      expect(res.status).toBe(200);
      requestIds.push(res.headers.get('x-request-id')!);
    }
  }));
  await stop(receiver);
  await putWorkflow(env, 'Renamed'); // the node the requests came through is gone: the decoder gives up on each
  let stages = await startServiceProcess(env, ['--services', 'decoder,dispatcher']);
  await lettersOnLog(env, n);
  await stop(stages);
  if (twice) {
    const broken = await runCli(['dead-letters', 'replay', '--workflow', WF], env);
    expect(broken.code).toBe(0);
    expect(JSON.parse(broken.stdout)).toMatchObject({ replayed: n, duplicates: 0 });
    stages = await startServiceProcess(env, ['--services', 'decoder,dispatcher']);
    await lettersOnLog(env, 2 * n);
    await stop(stages);
  }
  await putWorkflow(env, 'Hook'); // the fix
  return { env, cleanup, requestIds, letters: twice ? 2 * n : n };
}

/** How a kill is timed: resolves at the moment to kill (or never, when the process ends first). */
type Moment = { name: string; arm(): () => Promise<void> };

const sizeOf = (file: string) => { try { return statSync(file).size; } catch { return 0; } };
const journalBytes = (dataDir: string) => {
  const dir = path.join(dataDir, 'log');
  return readdirSync(dir).filter((f) => f.endsWith('.journal')).reduce((sum, f) => sum + sizeOf(path.join(dir, f)), 0);
};

/** Once `measure` grows past what it is when armed, then `afterMs` later (0: at once). */
function onGrowth(name: string, measure: () => number, afterMs: number): Moment {
  return {
    name: `${name}+${afterMs}ms`,
    arm() {
      const base = measure();
      return async () => {
        // A replay that has claimed all it will (complete before this run began) grows nothing: then a kill at 5 s.
        const deadline = Date.now() + 5_000;
        while (measure() <= base && Date.now() < deadline) await tick();
        if (afterMs > 0) await pause(afterMs);
      };
    },
  };
}

const afterTime = (ms: number): Moment => ({ name: `${ms}ms`, arm: () => () => pause(ms) });

/** The replay ledger's objects (one per committed batch of claims), in the filesystem store of DATA_DIR. */
const LEDGER = `replay/ledger/${TOPIC_NAMES.deadLetter}/`;
const ledgerBatches = (env: Record<string, string>) => { try { return readdirSync(path.join(env.DATA_DIR, 'objects', 'v2', ...LEDGER.split('/').filter(Boolean))).length; } catch { return 0; } };

/** The moments of a random chaos run: after the ledger's commit (the claim-append-checkpoint windows), or at a random time. */
function randomMoments(env: Record<string, string>, rng: () => number, count: number, maxDelayMs: number): Moment[] {
  return Array.from({ length: count }, () => (rng() < 0.6
    ? onGrowth('ledger', () => ledgerBatches(env), Math.floor(rng() * 12))
    : afterTime(Math.floor(rng() * maxDelayMs))));
}

/** Kill -9 `child` at `moment`, unless it ends first; true when killed. */
async function killAt(child: ChildProcess, armed: () => Promise<void>): Promise<boolean> {
  let ended = false;
  const exited = waitForExit(child).then(() => { ended = true; });
  await Promise.race([armed(), exited]);
  if (ended) return false;
  child.kill('SIGKILL');
  await exited;
  return true;
}

interface Execution { executionId: string; requestId: string; replayOf: string | null }

/** Every ExecutionRequested on the log, once `requestIds` all have one (and the log is quiet after). */
async function executionsOf(env: Record<string, string>, requestIds: string[]): Promise<Execution[]> {
  const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
  try {
    const deadline = Date.now() + 60_000;
    let all: Execution[] = [];
    while (Date.now() < deadline) {
      all = (await collectUntilQuiet(log, TOPIC_NAMES.executions, 1_500, 1_000)).map((r) => codec.decode('ExecutionRequested', r.value));
      if (new Set(all.map((e) => e.requestId)).size >= requestIds.length) break;
    }
    return all;
  } finally {
    await log.close();
  }
}

interface Ledger { replays: Set<string>; originals: Map<string, string[]> }

async function readLedger(env: Record<string, string>): Promise<Ledger> {
  const store = await openFilesystemStore(env.DATA_DIR);
  const lines: { replay: string; claims: [string, string][] }[] = [];
  try {
    for await (const name of store.list(LEDGER)) lines.push(JSON.parse((await readObject(store, name)).toString('utf8')));
  } finally {
    await store.close();
  }
  const originals = new Map<string, string[]>();
  for (const line of lines) for (const [original, letter] of line.claims) originals.set(original, [...(originals.get(original) ?? []), `${line.replay} ${letter}`]);
  return { replays: new Set(lines.map((l) => l.replay)), originals };
}

/**
 * What a chaos run must leave: no request without its execution, every execution a replay of its request with
 * its id, no request requested twice, and the ledger claiming each request once (by the letters
 * replayed: the newest of each request's letters when it has two).
 */
async function expectReplayedOnce(setup: Setup, executions: Execution[], kills: number) {
  const perRequest = new Map<string, Execution[]>();
  for (const e of executions) perRequest.set(e.requestId, [...(perRequest.get(e.requestId) ?? []), e]);
  const missing = setup.requestIds.filter((id) => !perRequest.has(id));
  expect(missing).toEqual([]);
  expect([...perRequest.keys()].filter((id) => !setup.requestIds.includes(id))).toEqual([]);
  for (const list of perRequest.values()) {
    expect(new Set(list.map((e) => e.executionId)).size).toBe(1);
    expect(list.every((e) => e.replayOf !== null)).toBe(true);
  }
  const twice = [...perRequest.entries()].filter(([, list]) => list.length > 1);
  if (twice.length > 0) console.log(`${twice.length} of ${setup.requestIds.length} requests were requested more than once (${kills} kills)`);
  expect(twice.map(([id, list]) => `${id} x${list.length}`)).toEqual([]);

  const ledger = await readLedger(setup.env);
  expect(new Set(ledger.originals.keys())).toEqual(new Set(setup.requestIds.map((id) => `request ${id}`)));
}

/** The direct command, `kill -9`ed at each moment and run again, until it completes; its runs' summaries. */
async function directChaos(setup: Setup, moments: Moment[]): Promise<{ kills: number; summaries: any[] }> {
  let kills = 0;
  const summaries: any[] = [];
  for (let round = 0; round < moments.length + 5; round++) {
    const moment = moments[round];
    const armed = moment?.arm();
    const child = spawn(process.execPath, [CLI, 'dead-letters', 'replay', '--workflow', WF], { env: { PATH: process.env.PATH ?? '', ...setup.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    if (armed && await killAt(child, armed)) { kills++; await closed; continue; }
    const code = await closed;
    if (code !== 0) throw new Error(`dead-letters replay exited ${code}:\n${stderr.slice(-3000)}`);
    summaries.push(JSON.parse(stdout));
    if (round >= moments.length - 1) return { kills, summaries };
  }
  throw new Error('the direct replay did not complete');
}

async function apiCall(url: string, method: string, route: string, body?: unknown) {
  const res = await fetch(`${url}${route}`, { method, headers: { authorization: `Bearer ${FULL_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/**
 * The replay through the service's API, the service `kill -9`ed at each moment and restarted; the same request
 * asked again after each restart goes on with the unfinished job. Ends with the service running, the job complete.
 */
async function serviceChaos(setup: Setup, moments: Moment[]): Promise<{ kills: number; jobs: any[]; service: ServiceProcess }> {
  const adminPort = await freePort();
  const env = { ...setup.env, ADMIN_PORT: String(adminPort) };
  const admin = `http://127.0.0.1:${adminPort}`;
  let kills = 0;
  const ids = new Set<string>();
  for (let round = 0; ; round++) {
    const service = await startServiceProcess(env);
    const moment = moments[round];
    const armed = moment?.arm();
    let asked: { status: number; body: any };
    try { asked = await apiCall(admin, 'POST', '/api/v1/dead-letters/replay', { workflow: WF }); } catch (error) {
      throw new Error(`${(error as Error).message}\n${service.output().slice(-3000)}`);
    }
    expect([200, 202]).toContain(asked.status);
    ids.add(asked.body.id);
    if (armed && await killAt(service.child, armed)) { kills++; continue; }
    // Not killed (or no more kills): this run goes to its end.
    const deadline = Date.now() + 60_000;
    let job = asked.body;
    while (job.state === 'running' && Date.now() < deadline) { await pause(100); job = (await apiCall(admin, 'GET', `/api/v1/replays/${asked.body.id}`)).body; }
    expect(job).toMatchObject({ state: 'complete', error: null });
    if (round >= moments.length - 1) {
      const jobs = (await apiCall(admin, 'GET', '/api/v1/replays')).body.replays.filter((j: any) => ids.has(j.id));
      return { kills, jobs, service };
    }
    await stop(service);
  }
}

const seed = Number(process.env.CHAOS_SEED ?? Date.now() % 100_000);

describe('dead-letter replays through kill -9 (embedded log)', () => {
  beforeAll(() => console.log(`replay chaos seed ${seed} (CHAOS_SEED=${seed} repeats it)`));

  test.each([false, true])('through the service (second letters: %s): each request requested exactly once, job complete', async (twice) => {
    const setup = await deadLettered(twice ? 200 : 500, twice, { ADMIN_TOKENS });
    const rng = random(seed + (twice ? 1 : 0));
    try {
      const moments = randomMoments(setup.env, rng, 4, 400);
      const { kills, jobs, service } = await serviceChaos(setup, moments);
      try {
        console.log(`service chaos (${twice ? 'two letters' : 'one letter'} per request): moments ${moments.map((m) => m.name).join(', ')}; ${kills} kills`);
        const executions = await executionsOf(setup.env, setup.requestIds);
        await expectReplayedOnce(setup, executions, kills);
        // One job (a kill after it completed leaves a complete job; the same request then starts one that replays nothing).
        const n = setup.requestIds.length;
        expect(jobs.every((j: any) => j.state === 'complete' && j.unrecorded === 0)).toBe(true);
        expect(jobs.reduce((sum: number, j: any) => sum + j.replayed, 0)).toBe(n);
        for (const j of jobs) expect(j.replayed + j.skipped).toBe(setup.letters);
        expect(jobs.reduce((sum: number, j: any) => sum + j.duplicates, 0)).toBe((jobs.length - 1) * setup.letters + (twice ? n : 0));
      } finally {
        await stop(service);
      }
    } finally {
      setup.cleanup();
    }
  }, 240_000);

  test.each([false, true])('directly, the service stopped (second letters: %s): each request requested exactly once', async (twice) => {
    const setup = await deadLettered(twice ? 200 : 500, twice);
    const rng = random(seed + 2 + (twice ? 1 : 0));
    try {
      const moments = [
        ...randomMoments(setup.env, rng, 3, 900),
        onGrowth('journal', () => journalBytes(setup.env.DATA_DIR), 0),
      ];
      const { kills, summaries } = await directChaos(setup, moments);
      console.log(`direct chaos (${twice ? 'two letters' : 'one letter'} per request): moments ${moments.map((m) => m.name).join(', ')}; ${kills} kills`);
      expect(summaries.at(-1)).toMatchObject({ interrupted: false, unrecorded: 0 });
      expect(readdirSync(path.join(setup.env.DATA_DIR, 'replay')).filter((f) => f.startsWith('dead-letters-') && f.endsWith('.json'))).toEqual([]);
      const stages = await startServiceProcess(setup.env, ['--services', 'decoder,dispatcher']);
      try {
        await expectReplayedOnce(setup, await executionsOf(setup.env, setup.requestIds), kills);
      } finally {
        await stop(stages);
      }
      // Complete: the same command again is a new replay, of nothing (every letter a duplicate).
      const again = await runCli(['dead-letters', 'replay', '--workflow', WF], setup.env);
      expect(again.code).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ replayed: 0, duplicates: setup.letters, unrecorded: 0 });
    } finally {
      setup.cleanup();
    }
  }, 180_000);

  /**
   * The window a random kill rarely meets: `kill -9` just after the copies' append, before the checkpoint's save.
   * The resumed run finds the copies that landed (refeed.ts, `appending` and `ingress-replay-copy`) and appends
   * none of them again.
   */
  test('directly, killed just after an append: each request requested exactly once', async () => {
    const setup = await deadLettered(300, false);
    try {
      const { kills } = await directChaos(setup, [onGrowth('journal', () => journalBytes(setup.env.DATA_DIR), 0)]);
      expect(kills).toBe(1);
      const stages = await startServiceProcess(setup.env, ['--services', 'decoder,dispatcher']);
      try {
        await expectReplayedOnce(setup, await executionsOf(setup.env, setup.requestIds), kills);
      } finally {
        await stop(stages);
      }
    } finally {
      setup.cleanup();
    }
  }, 120_000);
});

