import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { openLog } from '../../services/cli/backends';
import { loadConfig } from '../../services/platform/config/config';
import { silentLogger } from '../../services/platform/logger/logger';
import { pipelineTopics } from '../../services/platform/log/topics';
import { backendEnv, type BackendChoice } from '../support/app';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';

/**
 * Dead letters and replays as an operator runs them, on the embedded log and on real Kafka: a poison record is
 * dead-lettered while the records behind it flow; records a stage could not process are listed and, after a fix,
 * replayed into executions marked with `replayOf` and keeping their execution ids; ranges of the received and
 * decoded topics are replayed by offset and by time, and a finished replay is not repeated.
 */
const lines = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

describe.each<BackendChoice>(['embedded', 'real'])('on the %s backends', (choice) => {
  let env: Record<string, string>;
  let cleanup: () => void;
  let running: ServiceProcess[] = [];
  const topics = () => pipelineTopics(env.INGRESS_TOPIC_PREFIX ?? '');
  const cli = async (...args: string[]) => runCli(args, env);
  const putWorkflow = async (id: string, node: string) => {
    const file = path.join(env.DATA_DIR, `${id}.json`);
    writeFileSync(file, JSON.stringify({ id, active: true, nodes: [{ name: node, type: 'webhook' }] }));
    expect((await cli('workflows', 'put', file)).code).toBe(0);
  };
  const start = async (services = 'receiver,decoder,dispatcher') => { const s = await startServiceProcess(env, ['--services', services]); running.push(s); return s; };
  const stopAll = async () => {
    for (const s of running) s.child.kill('SIGTERM');
    for (const s of running) await waitForExit(s.child);
    running = [];
  };
  /**
   * The embedded log has one writer per DATA_DIR. These services run without an admin port (ADMIN_PORT=0), so
   * the CLI cannot ask them to replay (test/e2e/admin-cli.test.ts does): replays there run while they are stopped.
   */
  const whileWritable = async <T>(run: () => Promise<T>, restart: string): Promise<T> => {
    if (choice !== 'embedded') return run();
    await stopAll();
    const result = await run();
    await start(restart);
    return result;
  };
  const post = async (base: string, workflowId: string, body: unknown) => {
    const res = await fetch(`${base}/hook/${workflowId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    return res.headers.get('x-request-id')!;
  };
  const executions = async (count: number) => {
    const res = await cli('tail', topics().executions, '--from-beginning', '--max', String(count), '--timeout', '30');
    return lines(res.stdout);
  };

  beforeAll(async () => {
    ({ env, cleanup } = backendEnv(choice));
    if (choice === 'real') expect((await cli('topics', 'apply')).code).toBe(0);
  });
  afterAll(async () => { await stopAll(); cleanup(); });

  test('a poison record is dead-lettered and the records behind it (same key, same partition) still flow', async () => {
    await putWorkflow('wf-a', 'Hook');
    const log = await openLog(loadConfig(env), silentLogger);
    await log.append([{ topic: topics().received, key: 'wf-a', value: Buffer.from('not avro at all') }]);
    await log.close();
    const service = await start();
    const ids = [await post(service.baseUrl, 'wf-a', { n: 1 }), await post(service.baseUrl, 'wf-a', { n: 2 }), await post(service.baseUrl, 'wf-a', { n: 3 })];
    const got = await executions(3);
    expect(got.map((e) => e.requestId).sort()).toEqual([...ids].sort());
    expect(got.every((e) => e.replayOf === null)).toBe(true);
    const listed = lines((await cli('dead-letters', 'list')).stdout);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ stage: 'decoder', code: 'not-single-object', attempts: 1, workflowId: 'wf-a', requestId: null, source: `${topics().received}/${listed[0].source.split('/')[1]}/${listed[0].source.split('/')[2]}` });
    expect(listed[0].sourceRecord).toBeUndefined();
    expect(lines((await cli('dead-letters', 'list', '--with-source')).stdout)[0].sourceRecord.value).toBe(Buffer.from('not avro at all').toString('base64'));
  }, 90_000);

  test('replay of the received topic by offset re-runs the decoder: same execution ids, marked replayOf; a finished replay is not repeated', async () => {
    const replay = await whileWritable(() => cli('replay', topics().received, '--from', '0', '--workflow', 'wf-a'), 'receiver,decoder,dispatcher');
    expect(replay.code).toBe(0);
    // The poison record is not valid Avro, but it is a received record of wf-a all the same: replayed too.
    expect(lines(replay.stdout)[0]).toMatchObject({ replayed: 4, skipped: 0, interrupted: false });
    const all = await executions(6);
    const originals = all.filter((e) => e.replayOf === null);
    const replays = all.filter((e) => e.replayOf !== null);
    expect(replays.map((e) => e.executionId).sort()).toEqual(originals.map((e) => e.executionId).sort());
    for (const r of replays) expect(r.replayOf).toMatch(new RegExp(`^${topics().received.replace(/\./g, '\\.')}/\\d+/\\d+$`));

    const again = await whileWritable(() => cli('replay', topics().received, '--from', '0', '--workflow', 'wf-a'), 'receiver,decoder,dispatcher');
    expect(lines(again.stdout)[0]).toMatchObject({ replayed: 0, interrupted: false });
  }, 120_000);

  test('replay of the decoded topic by time re-runs the dispatcher only, skipping earlier replays', async () => {
    const replay = await whileWritable(() => cli('replay', topics().decoded, '--from', '2020-01-01T00:00:00Z', '--to', new Date(Date.now() + 3_600_000).toISOString()), 'receiver,decoder,dispatcher');
    expect(replay.code).toBe(0);
    expect(lines(replay.stdout)[0]).toMatchObject({ replayed: 3, skipped: 3 });
    const fromDecoded = (await executions(9)).filter((e) => String(e.replayOf).startsWith(topics().decoded));
    expect(fromDecoded).toHaveLength(3);
  }, 120_000);

  test('records a stage could not process are listed, and replayed after the fix into executions marked as replays', async () => {
    await stopAll();
    await putWorkflow('wf-dl', 'Hook');
    const receiver = await start('receiver');
    const ids = [await post(receiver.baseUrl, 'wf-dl', { x: 1 }), await post(receiver.baseUrl, 'wf-dl', { x: 2 })];
    await stopAll();
    await putWorkflow('wf-dl', 'Renamed'); // the trigger node the requests came through is gone: decoder gives up
    await start('decoder,dispatcher');
    const dead = lines((await cli('tail', topics().deadLetter, '--from-beginning', '--max', '3', '--timeout', '30')).stdout);
    expect(dead).toHaveLength(3);
    const listed = lines((await cli('dead-letters', 'list', '--stage', 'decoder', '--workflow', 'wf-dl')).stdout);
    expect(listed.map((l) => l.requestId).sort()).toEqual([...ids].sort());
    expect(listed.every((l) => l.code === 'trigger-missing' && l.stage === 'decoder')).toBe(true);
    expect(lines((await cli('dead-letters', 'list', '--stage', 'dispatcher')).stdout)).toEqual([]);
    expect(lines((await cli('dead-letters', 'list', '--since', new Date(Date.now() + 60_000).toISOString())).stdout)).toEqual([]);

    await putWorkflow('wf-dl', 'Hook'); // the fix
    const replay = await whileWritable(() => cli('dead-letters', 'replay', '--workflow', 'wf-dl'), 'decoder,dispatcher');
    expect(replay.code).toBe(0);
    expect(lines(replay.stdout)[0]).toMatchObject({ replayed: 2, interrupted: false });
    const replayed = (await executions(11)).filter((e) => e.workflowId === 'wf-dl');
    expect(replayed.map((e) => e.requestId).sort()).toEqual([...ids].sort());
    expect(replayed.map((e) => e.replayOf).sort()).toEqual(listed.map((l) => l.source).sort());
  }, 150_000);

  if (choice === 'embedded') {
    test('on the embedded log a replay refuses to write beside a running service whose management API it cannot reach (ADMIN_PORT=0 here), and says why', async () => {
      const res = await cli('replay', topics().received, '--from', '0');
      expect(running.length).toBeGreaterThan(0);
      expect(running[0].child.exitCode).toBeNull();
      expect(res.code).toBe(1);
      expect(res.stderr).toMatch(/its management API could not be reached \(ADMIN_PORT=0, or DATA_DIR\/admin-api\.json not written\?\): set ADMIN_URL and ADMIN_TOKEN, or stop the service/);
    });
  }

  test('usage: only stage inputs replay, and positions are checked', async () => {
    expect((await cli('replay', topics().executions, '--from', '0')).stderr).toMatch(/re-feeds a stage's input topic/);
    expect((await cli('replay', topics().received)).code).toBe(2);
    expect((await cli('replay', topics().received, '--from', 'yesterday')).stderr).toMatch(/--from takes an offset or an ISO time/);
    expect((await cli('dead-letters', 'list', '--since', '5')).stderr).toMatch(/--since takes an ISO time/);
    const stage = await cli('dead-letters', 'list', '--stage', 'foo');
    expect({ code: stage.code, stderr: stage.stderr }).toEqual({ code: 2, stderr: expect.stringContaining('stage takes one of decoder, dispatcher, sampler, mdn') });
  });
});
