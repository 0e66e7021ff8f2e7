import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { TOPIC_NAMES } from '../../services/platform/log/topics';
import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import { CLI, runCli, STAGE_WORKER_CRASH, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { getFreePort } from '../support/servers';

/**
 * `ingress start` with the stages in their worker thread (STAGE_THREADS=1, the default): what the receiver
 * answered 200 becomes one execution each, SIGTERM stops it cleanly, metrics recorded in the worker reach the
 * exporter, and a worker that exits on its own takes the process down, non-zero, losing nothing.
 */
const codec = defaultAvroCodec();

async function putWorkflow(env: Record<string, string>, id: string): Promise<void> {
  const file = path.join(env.DATA_DIR, `${id}.json`);
  writeFileSync(file, JSON.stringify({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
  expect((await runCli(['workflows', 'put', file], env)).code).toBe(0);
}

async function post(service: ServiceProcess, workflowId: string, body: unknown): Promise<string> {
  const res = await fetch(`${service.baseUrl}/hook/${workflowId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return res.headers.get('x-request-id')!;
}

/** The request ids of the executions in DATA_DIR, once `expected` of them are there or nothing more comes. */
async function executionRequestIds(dataDir: string, expected: number): Promise<string[]> {
  const log = await openEmbeddedLog({ dataDir, readOnly: true });
  try {
    let ids: string[] = [];
    for (let rounds = 0; rounds < 40 && ids.length < expected; rounds++) {
      ids = (await collectUntilQuiet(log, TOPIC_NAMES.executions, 700)).map((r) => codec.decode('ExecutionRequested', r.value).requestId);
    }
    return ids;
  } finally {
    await log.close();
  }
}

function exitCode(service: ServiceProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (service.child.exitCode !== null) resolve(service.child.exitCode);
    else service.child.once('exit', (code) => resolve(code));
  });
}

test('posts become executions exactly once through the stage worker; SIGTERM stops it with status 0', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-threads');
    const service = await startServiceProcess(env);
    const accepted = await Promise.all(Array.from({ length: 40 }, (_, i) => post(service, 'wf-threads', { i })));
    const ids = await executionRequestIds(env.DATA_DIR, accepted.length);
    service.child.kill('SIGTERM');
    expect(await exitCode(service)).toBe(0);
    expect(ids.sort()).toEqual([...accepted].sort());
    // The stages' lines come from the worker, through the main thread's stdout, whole.
    const lines = service.output().split('\n').filter((l) => l.startsWith('{'));
    expect(lines.every((l) => { try { JSON.parse(l); return true; } catch { return false; } })).toBe(true);
    expect(lines.some((l) => JSON.parse(l).msg === 'stopped')).toBe(true);
  } finally {
    cleanup();
  }
}, 90_000);

test('the decoder in the worker reads idempotency keys back through the main thread\'s log; its lines reach stdout whole', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    const file = path.join(env.DATA_DIR, 'wf-keyed.json');
    writeFileSync(file, JSON.stringify({ id: 'wf-keyed', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'Idempotency-Key' } } } }] }));
    expect((await runCli(['workflows', 'put', file], env)).code).toBe(0);
    await putWorkflow(env, 'wf-plain');
    const service = await startServiceProcess(env);
    try {
      // Records before the first keyed one: what the decoder's ledger reads back (log.read over the port).
      const plain = await Promise.all([1, 2, 3].map((i) => post(service, 'wf-plain', { i })));
      const keyed = async (n: number) => {
        const res = await fetch(`${service.baseUrl}/hook/wf-keyed`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' }, body: JSON.stringify({ n }) });
        expect(res.status).toBe(200);
        return res.headers.get('x-request-id')!;
      };
      const first = await keyed(1);
      await executionRequestIds(env.DATA_DIR, plain.length + 1);
      await keyed(2);
      while (!service.output().includes('request repeats an accepted idempotency key')) await new Promise((r) => setTimeout(r, 50));
      expect((await executionRequestIds(env.DATA_DIR, plain.length + 1)).sort()).toEqual([...plain, first].sort());
      const lines = service.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; service?: string; keyed?: number });
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'idempotency keys read back from the received topic', service: 'decoder' }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'request repeats an accepted idempotency key: no execution requested', service: 'decoder' }));
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test('metrics recorded by the stages in the worker reach the main thread\'s exporter under their own names', async () => {
  const metricsPort = await getFreePort();
  const { env, cleanup } = backendEnv('embedded', { OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_PORT: String(metricsPort), OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1', OTEL_TRACES_EXPORTER: 'none' });
  try {
    await putWorkflow(env, 'wf-metered');
    const service = await startServiceProcess(env);
    try {
      await post(service, 'wf-metered', { measured: true });
      await executionRequestIds(env.DATA_DIR, 1);
      let text = '';
      // The dispatcher's count is recorded after its batch commits: read until it shows (bounded by the test timeout).
      while (!/ingress_stage_records_total\{[^}]*ingress_stage="dispatcher"[^}]*\} 1/.test(text)) {
        text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(text).toMatch(/ingress_stage_records_total\{[^}]*ingress_stage="decoder"[^}]*ingress_outcome="processed"[^}]*\} 1/);
      expect(text).toMatch(/ingress_requests_total\{[^}]*http_response_status_code="200"[^}]*\} 1/);
      // The lag gauge is read from the worker, whose stages know their groups.
      expect(text).toMatch(/messaging_kafka_consumer_lag\{[^}]*ingress_stage="decoder"/);
    } finally {
      service.child.kill('SIGTERM');
      await waitForExit(service.child);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test('spans of the stages in the worker continue the receiver\'s trace (the worker\'s own SDK, traces only)', async () => {
  const { env, cleanup } = backendEnv('embedded', { OTEL_TRACES_EXPORTER: 'console', OTEL_METRICS_EXPORTER: 'none' });
  try {
    await putWorkflow(env, 'wf-traced');
    const service = await startServiceProcess(env);
    try {
      await post(service, 'wf-traced', { traced: true });
      // The console exporter prints each span when it ends; the dispatcher's is the last of the request.
      while (!service.output().includes(`name: '${TOPIC_NAMES.decoded} process'`)) await new Promise((r) => setTimeout(r, 50));
      const output = service.output();
      expect(output).toContain("name: 'POST /hook/{workflowId}'");
      expect(output).toContain(`name: '${TOPIC_NAMES.received} process'`);
      expect(new Set([...output.matchAll(/traceId: '([0-9a-f]{32})'/g)].map((m) => m[1])).size).toBe(1);
    } finally {
      service.child.kill('SIGTERM');
      await waitForExit(service.child);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test('a stage worker that exits mid-batch stops the process non-zero with a clear line; a restart loses nothing and doubles nothing', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-crash');
    // The worker exits as it is handed its second batch: the first is committed, the second is not.
    const crashing = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_AT_BATCH: '2' }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    const code = exitCode(crashing);
    const accepted: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${crashing.baseUrl}/hook/wf-crash`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) }).catch(() => null);
      if (res?.status === 200) accepted.push(res.headers.get('x-request-id')!);
    }
    expect(await code).toBe(1);
    expect(accepted.length).toBeGreaterThan(0);
    const lines = crashing.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: string; msg: string; code?: number });
    expect(lines).toContainEqual(expect.objectContaining({ level: 'error', msg: 'stage worker thread exited unexpectedly: the stages no longer run; stopping the process', code: 70 }));

    const restarted = await startServiceProcess(env);
    try {
      const ids = await executionRequestIds(env.DATA_DIR, accepted.length);
      expect(ids.sort()).toEqual([...accepted].sort());
    } finally {
      restarted.child.kill('SIGTERM');
      await waitForExit(restarted.child);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test.each([
  ['ends the worker thread', {}],
  // The watchdog terminates a worker whose event loop stopped answering, which then goes as a worker that ended.
  ['hangs the worker thread', { CRASH_STAGE_WORKER_HANG: '1', STAGE_WATCHDOG_MS: '2000' }],
])('a record that %s every time it is handled is dead-lettered stage-crashed after three lives; the records around it run once', async (_what, extra: Record<string, string>) => {
  const { env, cleanup } = backendEnv('embedded');
  const poison = 'poison-pill-7c1e';
  const crashing = { ...env, ...extra, CRASH_STAGE_WORKER_ON: poison };
  const options = { nodeArgs: ['--require', STAGE_WORKER_CRASH] };
  /** One life of the service: null when it came up and stays up, else how it ended (it may end before it listens). */
  const life = async (): Promise<{ code: number | null; output: string } | { service: ServiceProcess }> => {
    let service: ServiceProcess;
    try {
      service = await startServiceProcess(crashing, [], options);
    } catch (error) {
      return { code: 1, output: String(error) };
    }
    const ended = await Promise.race([exitCode(service), new Promise<'up'>((r) => setTimeout(() => r('up'), 8000))]);
    return ended === 'up' ? { service } : { code: ended, output: service.output() };
  };
  try {
    await putWorkflow(env, 'wf-poison');
    const first = await startServiceProcess(crashing, [], options);
    const code = exitCode(first);
    const before = await post(first, 'wf-poison', { n: 'before' });
    expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual([before]);
    const pill = await post(first, 'wf-poison', { n: poison });
    expect(await code).toBe(1);
    if (extra.CRASH_STAGE_WORKER_HANG) expect(first.output()).toContain('stage worker thread does not answer: terminating it');

    // The test is the supervisor: it starts the service again until a life stays up.
    const ends: { code: number | null; output: string }[] = [];
    let survivor: ServiceProcess | null = null;
    while (!survivor && ends.length < 4) {
      const next = await life();
      if ('service' in next) survivor = next.service;
      else ends.push(next);
    }
    // The second life dies on its first batch (marked), the third with the pill alone in hand, the fourth
    // dead-letters it unhandled.
    expect(ends.map((e) => e.code)).toEqual([1, 1]);
    expect(survivor).not.toBeNull();
    try {
      const after = await post(survivor!, 'wf-poison', { n: 'after' });
      expect((await executionRequestIds(env.DATA_DIR, 2)).sort()).toEqual([before, after].sort());
      const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
      try {
        const letters = (await collectUntilQuiet(log, TOPIC_NAMES.deadLetter, 700)).map((r) => codec.decode('DeadLetter', r.value));
        expect(letters.map((d) => [d.stage, d.errorCode, codec.decode('Received', d.source.value).requestId])).toEqual([['decoder', 'stage-crashed', pill]]);
      } finally {
        await log.close();
      }
      const lines = survivor!.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; alone?: boolean; errorCode?: string });
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'a process ended while this stage held these records: handling them one at a time', alone: true }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'record dead-lettered', errorCode: 'stage-crashed' }));
    } finally {
      survivor!.child.kill('SIGTERM');
      expect(await exitCode(survivor!)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 150_000);

test('STAGE_THREADS=0 runs the stages on the main thread; a bad value is refused at startup naming the variable', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    const refused = await runCli(['start'], { ...env, STAGE_THREADS: '2' });
    expect(refused.code).toBe(78);
    expect(refused.stderr).toContain('STAGE_THREADS="2"');
    await putWorkflow(env, 'wf-main-thread');
    // A worker would exit at its first batch: with STAGE_THREADS=0 there is none, and the pipeline runs.
    const service = await startServiceProcess({ ...env, STAGE_THREADS: '0', CRASH_STAGE_WORKER_AT_BATCH: '1' }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    try {
      const accepted = [await post(service, 'wf-main-thread', { one: 1 })];
      expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual(accepted);
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test('the stage worker reads the configuration main() was given, not the process environment', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-given-env');
    // The process environment names other topics: a worker reading it would consume a received topic no one writes.
    const script = `require(${JSON.stringify(CLI)}).main(['start'], JSON.parse(process.env.GIVEN_ENV)).then((code) => process.exit(code))`;
    const service = await startServiceProcess({ ...env, INGRESS_TOPIC_PREFIX: 'elsewhere.', GIVEN_ENV: JSON.stringify({ PATH: process.env.PATH ?? '', ...env }) }, [], { script });
    try {
      const accepted = [await post(service, 'wf-given-env', { given: true })];
      expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual(accepted);
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 90_000);
