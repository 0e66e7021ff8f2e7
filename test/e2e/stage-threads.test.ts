import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { LogRecord } from '../../services/platform/log/event-log';
import { pipelineTopics, TOPIC_NAMES } from '../../services/platform/log/topics';
import { crashMarksIn } from '../../services/platform/log/crash-guard';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { openFileRegistry } from '../../services/platform/registry/file-registry';
import type { Registry } from '../../services/platform/registry/registry';
import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import { CLI, GAUGE_CALLBACKS, runCli, STAGE_WORKER_CRASH, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { MAX_WORKER_RESTARTS } from '../../services/cli/stage-thread';
import { getFreePort } from '../support/servers';
import { as2Headers } from '../support/as2-client';
import { createPeer } from '../support/as2-peer';
import { putAsyncMdnWorkflow, startMdnReceiver } from '../support/mdn-receiver';

/**
 * `ingress start` with the stages in their worker thread (STAGE_THREADS=1, the default): what the receiver
 * answered 200 becomes one execution each, SIGTERM stops it cleanly, metrics recorded in the worker reach the
 * exporter, and a worker that exits on its own takes the process down, non-zero, losing nothing.
 */
const codec = defaultAvroCodec();

/** A webhook workflow put through the CLI; `parameters` for its trigger node (an idempotency key, say). */
async function putWorkflow(env: Record<string, string>, id: string, parameters?: Record<string, unknown>): Promise<void> {
  const file = path.join(env.DATA_DIR, `${id}.json`);
  writeFileSync(file, JSON.stringify({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook', ...(parameters ? { parameters } : {}) }] }));
  expect((await runCli(['workflows', 'put', file], env)).code).toBe(0);
}

/** A trigger node's parameters that key requests by their Idempotency-Key header. */
const KEYED = { options: { idempotencyKey: { header: 'Idempotency-Key' } } };

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
    await putWorkflow(env, 'wf-keyed', KEYED);
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

/** The service's log lines so far: only whole ones (it may be writing the last), and only JSON ones. */
const logLines = (service: ServiceProcess) => {
  const text = service.output();
  return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').flatMap((l) => {
    if (!l.startsWith('{')) return [];
    try { return [JSON.parse(l) as { level: string; msg: string; code?: number; alone?: boolean; errorCode?: string }]; } catch { return []; }
  });
};

test('a stage worker that exits mid-batch is started again in the process: the receiver goes on accepting, and nothing is lost or doubled', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-crash');
    // The first worker exits as it is handed its second batch: the first is committed, the second is not.
    const once = path.join(env.DATA_DIR, 'worker-crashed');
    const service = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_AT_BATCH: '2', CRASH_STAGE_WORKER_ONCE_FILE: once }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    try {
      const accepted: string[] = [];
      for (let i = 0; i < 8; i++) accepted.push(await post(service, 'wf-crash', { i }));
      expect((await executionRequestIds(env.DATA_DIR, accepted.length)).sort()).toEqual([...accepted].sort());
      expect(existsSync(once)).toBe(true);
      const lines = logLines(service);
      expect(lines).toContainEqual(expect.objectContaining({ level: 'error', msg: 'stage worker thread exited unexpectedly', code: 70 }));
      expect(lines.filter((l) => l.msg === 'stage worker thread ended: starting another')).toHaveLength(1);
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test('a stage worker that exits takes its lag gauge with it: the exporter no longer runs its callback, and runs its successor\'s', async () => {
  const metricsPort = await getFreePort();
  const { env, cleanup } = backendEnv('embedded', { OTEL_METRICS_EXPORTER: 'prometheus', OTEL_EXPORTER_PROMETHEUS_PORT: String(metricsPort), OTEL_EXPORTER_PROMETHEUS_HOST: '127.0.0.1', OTEL_TRACES_EXPORTER: 'none' });
  try {
    await putWorkflow(env, 'wf-gauges');
    const calls = path.join(env.DATA_DIR, 'gauge-callbacks');
    writeFileSync(calls, '');
    // The first worker exits as it is handed its first batch; its successor handles it.
    const service = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_AT_BATCH: '1', CRASH_STAGE_WORKER_ONCE_FILE: path.join(env.DATA_DIR, 'worker-crashed'), GAUGE_CALLBACKS_FILE: calls },
      [], { nodeArgs: ['--require', STAGE_WORKER_CRASH, '--require', GAUGE_CALLBACKS] });
    /** One scrape: its text, and the callbacks of each gauge it ran (gauge-callbacks.js numbers them as they are added). */
    const scrape = async () => {
      const from = readFileSync(calls, 'utf8').length;
      const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const ran = readFileSync(calls, 'utf8').slice(from).split('\n').filter(Boolean);
      const of = (gauge: string) => ran.filter((l) => l.startsWith(`${gauge} `)).map((l) => l.slice(gauge.length + 1)).sort();
      return { text, lag: of('messaging.kafka.consumer.lag'), certificates: of('ingress.certificate.days_to_expiry') };
    };
    try {
      const before = await scrape();
      expect(before.text).toMatch(/messaging_kafka_consumer_lag\{[^}]*ingress_stage="decoder"/);
      const accepted = await post(service, 'wf-gauges', { gauged: true });
      expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual([accepted]);
      expect(logLines(service)).toContainEqual(expect.objectContaining({ msg: 'stage worker thread ended: starting another' }));
      const after = await scrape();
      // The worker's callback gave way to its successor's: as many run as before, one of them new.
      expect(after.lag).toHaveLength(before.lag.length);
      expect(after.lag.filter((c) => !before.lag.includes(c))).toHaveLength(1);
      expect(before.lag.filter((c) => !after.lag.includes(c))).toHaveLength(1);
      // The successor's gauge is reported; the certificate gauge is the main thread's (the worker watches none).
      expect(after.text).toMatch(/messaging_kafka_consumer_lag\{[^}]*ingress_stage="decoder"/);
      expect(after.certificates).toEqual(before.certificates);
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 60_000);

test('a stage worker that ends every time stops the process non-zero after its restarts; a start without the fault loses nothing', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-always');
    // Every worker exits as it is handed its first batch, before any mark is written.
    const crashing = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_AT_BATCH: '1' }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    const code = exitCode(crashing);
    const accepted = [await post(crashing, 'wf-always', { n: 1 })];
    expect(await code).toBe(1);
    const lines = logLines(crashing);
    expect(lines.filter((l) => l.msg === 'stage worker thread ended: starting another')).toHaveLength(MAX_WORKER_RESTARTS);
    expect(lines).toContainEqual(expect.objectContaining({ level: 'error', msg: 'stage worker thread ended too often: the stages no longer run; stopping the process' }));

    const restarted = await startServiceProcess(env);
    try {
      expect(await executionRequestIds(env.DATA_DIR, accepted.length)).toEqual(accepted);
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
])('a record that %s every time it is handled is dead-lettered stage-crashed after four workers; the records around it run once, the process stays up', async (_what, extra: Record<string, string>) => {
  const { env, cleanup } = backendEnv('embedded');
  const poison = 'poison-pill-7c1e';
  try {
    await putWorkflow(env, 'wf-poison');
    const service = await startServiceProcess({ ...env, ...extra, CRASH_STAGE_WORKER_ON: poison }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    try {
      const before = await post(service, 'wf-poison', { n: 'before' });
      expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual([before]);
      const pill = await post(service, 'wf-poison', { n: poison });
      const after = await post(service, 'wf-poison', { n: 'after' });
      // The first worker ends on the pill in a batch, the second on its first batch (marked), the third and the
      // fourth with the pill alone in hand (two strikes); the fifth dead-letters it unhandled and goes on.
      expect((await executionRequestIds(env.DATA_DIR, 2)).sort()).toEqual([before, after].sort());
      const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
      try {
        const letters = (await collectUntilQuiet(log, TOPIC_NAMES.deadLetter, 700)).map((r) => codec.decode('DeadLetter', r.value));
        expect(letters.map((d) => [d.stage, d.errorCode, codec.decode('Received', d.source.value).requestId])).toEqual([['decoder', 'stage-crashed', pill]]);
      } finally {
        await log.close();
      }
      const lines = logLines(service);
      expect(lines.filter((l) => l.msg === 'stage worker thread ended: starting another')).toHaveLength(4);
      if (extra.CRASH_STAGE_WORKER_HANG) expect(lines.filter((l) => l.msg === 'stage worker thread does not answer: terminating it')).toHaveLength(4);
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'a process ended while this stage held these records: handling them one at a time', alone: true }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'record dead-lettered', errorCode: 'stage-crashed' }));
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 150_000);

/** The dead letters in DATA_DIR, once `expected` of them are there or nothing more comes. */
async function deadLetters(dataDir: string, expected: number) {
  const log = await openEmbeddedLog({ dataDir, readOnly: true });
  try {
    let letters: LogRecord[] = [];
    // Read at least once: expecting none is read too.
    for (let rounds = 0; rounds < 40 && (rounds === 0 || letters.length < expected); rounds++) letters = await collectUntilQuiet(log, TOPIC_NAMES.deadLetter, 700);
    return letters.map((r) => codec.decode('DeadLetter', r.value));
  } finally {
    await log.close();
  }
}

test('a record that ends the worker whenever the journal stage handles it is skipped after four workers (the journal has no dead letters); the records after it are journaled', async () => {
  const { env, cleanup } = backendEnv('embedded');
  const poison = 'poison-pill-5d2a';
  try {
    // Calls from loopback are refused (403) and journaled as refusals, which the journal stage alone reads: the
    // pill is the refusal whose entry names the workflow that holds the text.
    const walled = { options: { ipAllowList: ['203.0.113.0/24'] } };
    await putWorkflow(env, 'wf-walled', walled);
    await putWorkflow(env, `wf-walled-${poison}`, walled);
    const service = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_WRITE_ON: poison }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    const registry = await openFileRegistry(env.DATA_DIR);
    try {
      const refused = async (workflowId: string) => {
        const res = await fetch(`${service.baseUrl}/hook/${workflowId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        expect(res.status).toBe(403);
        return res.headers.get('x-request-id')!;
      };
      const before = await refused('wf-walled');
      expect(await journaled(registry, before)).toEqual(['refused']);
      const pill = await refused(`wf-walled-${poison}`);
      const after = await refused('wf-walled');
      // The first worker ends on the pill in a batch, the second on its first batch (marked), the third and the
      // fourth with the pill alone in hand (two strikes); the fifth skips it unhandled and goes on.
      expect(await journaled(registry, after, 120_000)).toEqual(['refused']);
      expect(await registry.journal.request(pill)).toEqual([]);
      const lines = logLines(service);
      expect(lines.filter((l) => l.msg === 'stage worker thread ended: starting another')).toHaveLength(4);
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'a process ended while this stage held these records: handling them one at a time', stage: 'journal', alone: true }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'journal skipped a record that ended the process handling it', topic: TOPIC_NAMES.refused }));
      expect(await deadLetters(env.DATA_DIR, 0)).toEqual([]);
    } finally {
      await registry.close();
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 180_000);

/** The kinds of a request's journal entries, once it has some. */
async function journaled(registry: Registry, requestId: string, withinMs = 30_000): Promise<string[]> {
  const deadline = Date.now() + withinMs;
  let entries = await registry.journal.request(requestId);
  while (entries.length === 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    entries = await registry.journal.request(requestId);
  }
  return entries.map((e) => e.kind);
}

test('an asynchronous MDN whose POST ends the worker every time is dead-lettered stage-crashed after four workers, the deliveries after it go out, and its dead letter replays', async () => {
  const { env, cleanup } = backendEnv('embedded', { AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms' });
  const poison = 'poison-pill-9b3f';
  const peer = createPeer();
  const mdns = await startMdnReceiver();
  try {
    const receiver = await peer.party('receiver');
    expect(await putAsyncMdnWorkflow(env, receiver, mdns)).toBe(true);
    const service = await startServiceProcess({ ...env, CRASH_STAGE_WORKER_POST_TO: poison }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    try {
      // A plain message from an unpinned partner, with an unsigned receipt asked for asynchronously at `inbox`.
      const send = async (inbox: string) => {
        const headers = as2Headers({ 'Disposition-Notification-Options': null, 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/mdn/${inbox}`, 'Content-Type': 'application/edi-x12' });
        const res = await fetch(`${service.baseUrl}/hook/wf-async`, { method: 'POST', headers, body: 'ISA*00*~ST*850*0001~SE*2*0001~' });
        expect(res.status).toBe(200);
      };
      await send('before');
      await mdns.seen(1);
      await send(poison);
      await send('after');
      // The first worker ends on the pill's POST in a batch, the second on its first batch (marked), the third
      // and the fourth with the pill alone in hand (two strikes); the fifth dead-letters it unsent and goes on.
      await mdns.seen(2);
      expect(mdns.posts.map((p) => p.path)).toEqual(['/mdn/before', '/mdn/after']);
      const letters = await deadLetters(env.DATA_DIR, 1);
      expect(letters.map((d) => [d.stage, d.errorCode, d.source.topic])).toEqual([['mdn', 'stage-crashed', TOPIC_NAMES.mdnDeliveries]]);
      const pill = codec.decode('MdnDelivery', letters[0].source.value);
      expect(pill.url).toContain(poison);
      // Beside its dead letter, the delivery's one outcome, dead_lettered and unattempted, and the request's journal reads it.
      const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
      try {
        const outcomes = (await collectUntilQuiet(log, TOPIC_NAMES.mdnOutcomes, 700)).map((r) => codec.decode('MdnOutcome', r.value)).filter((o) => o.requestId === pill.requestId);
        expect(outcomes.map((o) => [o.outcome, o.attempts, o.status])).toEqual([['dead_lettered', 0, null]]);
        expect(outcomes[0].reason).toMatch(/^stage-crashed/);
      } finally {
        await log.close();
      }
      const registry = await openFileRegistry(env.DATA_DIR);
      try {
        const deadline = Date.now() + 30_000;
        let kinds = await journaled(registry, pill.requestId);
        while (!kinds.includes('mdn-dead-lettered') && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          kinds = await journaled(registry, pill.requestId);
        }
        expect(kinds.filter((k) => k.startsWith('mdn-'))).toEqual(['mdn-dead-lettered']);
      } finally {
        await registry.close();
      }
      const lines = logLines(service);
      expect(lines.filter((l) => l.msg === 'stage worker thread ended: starting another')).toHaveLength(4);
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'as2.mdn-dead-lettered' }));
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'a process ended while this stage held these records: handling them one at a time', stage: 'mdn', alone: true }));
    } finally {
      service.child.kill('SIGTERM');
      expect(await exitCode(service)).toBe(0);
    }
    // Replayed as any mdn dead letter (once what ended the process is fixed): the MDN goes out, once.
    const replay = await runCli(['dead-letters', 'replay', '--stage', 'mdn'], env);
    expect(replay.code).toBe(0);
    const fixed = await startServiceProcess(env);
    try {
      await mdns.seen(3);
      expect(mdns.posts.map((p) => p.path)).toEqual(['/mdn/before', '/mdn/after', `/mdn/${poison}`]);
    } finally {
      fixed.child.kill('SIGTERM');
      expect(await exitCode(fixed)).toBe(0);
    }
  } finally {
    await mdns.close();
    peer.cleanup();
    cleanup();
  }
}, 180_000);

test('a stop whose grace runs out while a batch is in hand marks it stopped: the next start runs it as usual, not as a crash', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-slow-read');
    // The decoder's first read of the workflow takes 60 s: the batch is in hand when the 1 s grace runs out.
    const service = await startServiceProcess({ ...env, SHUTDOWN_GRACE_MS: '1000', CRASH_STAGE_WORKER_SLOW_READ: 'wf-slow-read.json:60000' }, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
    const accepted = await post(service, 'wf-slow-read', { n: 1 });
    const store = await openFilesystemStore(env.DATA_DIR);
    const marks = crashMarksIn(store);
    const decoderMark = () => marks.read(pipelineTopics(undefined).group('decoder'), TOPIC_NAMES.received, 0);
    for (let i = 0; i < 100 && (await decoderMark()) === null; i++) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await decoderMark()).toMatchObject({ alone: false });
    const code = exitCode(service);
    service.child.kill('SIGTERM');
    await code;
    expect(await decoderMark()).toMatchObject({ alone: false, stopped: true });

    const again = await startServiceProcess(env);
    try {
      expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual([accepted]);
      expect(logLines(again).filter((l) => l.msg === 'a process ended while this stage held these records: handling them one at a time')).toEqual([]);
    } finally {
      again.child.kill('SIGTERM');
      expect(await exitCode(again)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 90_000);

test('three starts killed while the decoder reads idempotency keys back do not convict the keyed record: the read-back is outside the crash guard', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    await putWorkflow(env, 'wf-read-back', KEYED);
    // Each start's read-back waits a minute for the log's offset by time: the process is killed (-9) inside it,
    // as an OOM loop at start or a probe that kills too early would. Inside the guard, the keyed record would be
    // in hand at all three ends (the first in its marked batch, two alone) and dead-lettered at the fourth start.
    const slow = { ...env, CRASH_STAGE_WORKER_SLOW_CALL: 'log.offsetsForTime:60000' };
    let accepted = '';
    for (let start = 1; start <= 3; start++) {
      const service = await startServiceProcess(slow, [], { nodeArgs: ['--require', STAGE_WORKER_CRASH] });
      if (start === 1) {
        const res = await fetch(`${service.baseUrl}/hook/wf-read-back`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k1' }, body: '{"n":1}' });
        expect(res.status).toBe(200);
        accepted = res.headers.get('x-request-id')!;
      }
      try {
        for (let waited = 0; !service.output().includes('slow call log.offsetsForTime'); waited += 50) {
          if (waited > 20_000) throw new Error(`start ${start}: no read-back began in 20 s:\n${service.output().slice(-3000)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        service.child.kill('SIGKILL');
        await waitForExit(service.child);
      }
    }
    const again = await startServiceProcess(env);
    try {
      const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
      try {
        // The decoder's verdict on the record: decoded, or a dead letter.
        let decoded: LogRecord[] = [];
        let letters: LogRecord[] = [];
        for (let round = 0; round < 100 && decoded.length + letters.length === 0; round++) {
          decoded = await collectUntilQuiet(log, TOPIC_NAMES.decoded, 100, 100);
          letters = await collectUntilQuiet(log, TOPIC_NAMES.deadLetter, 100, 100);
        }
        expect(letters.map((r) => codec.decode('DeadLetter', r.value).errorCode)).toEqual([]);
        expect(decoded.map((r) => codec.decode('Decoded', r.value).requestId)).toEqual([accepted]);
      } finally {
        await log.close();
      }
      expect(await executionRequestIds(env.DATA_DIR, 1)).toEqual([accepted]);
    } finally {
      again.child.kill('SIGTERM');
      expect(await exitCode(again)).toBe(0);
    }
  } finally {
    cleanup();
  }
}, 90_000);

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
