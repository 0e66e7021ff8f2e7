import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { openLog } from '../../services/cli/backends';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { loadConfig } from '../../services/platform/config/config';
import type { EventLog, LogRecord } from '../../services/platform/log/event-log';
import { silentLogger } from '../../services/platform/logger/logger';
import { pipelineTopics } from '../../services/platform/log/topics';
import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';

/**
 * RECORD_KEY=request on real Kafka (3 partitions per topic): the records of one workflow are keyed by their
 * request and spread over the partitions, each request still becomes exactly one execution, and what selects
 * records by workflow (dead letters, `replay --workflow`) reads the workflow from the record, not its key.
 */
const codec = defaultAvroCodec();
const lines = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
let env: Record<string, string>;
let cleanup: () => void;
let service: ServiceProcess;
let log: EventLog;
const topics = () => pipelineTopics(env.INGRESS_TOPIC_PREFIX);
const cli = (...args: string[]) => runCli(args, env);

beforeAll(async () => {
  ({ env, cleanup } = backendEnv('real', { RECORD_KEY: 'request' }));
  expect((await cli('topics', 'apply')).code).toBe(0);
  const file = path.join(env.DATA_DIR, 'wf-spread.json');
  writeFileSync(file, JSON.stringify({ id: 'wf-spread', active: true, nodes: [{ name: 'Hook', type: 'webhook' }] }));
  expect((await cli('workflows', 'put', file)).code).toBe(0);
  service = await startServiceProcess(env, ['--services', 'receiver,decoder,dispatcher']);
  log = await openLog(loadConfig(env), silentLogger);
}, 120_000);
afterAll(async () => {
  await log?.close();
  if (service) { service.child.kill('SIGTERM'); await waitForExit(service.child); }
  cleanup();
});

/** The records of a topic until `done` holds of them (or 30 s pass). */
async function recordsUntil(topic: string, done: (records: LogRecord[]) => boolean): Promise<LogRecord[]> {
  const deadline = Date.now() + 30_000;
  let records: LogRecord[] = [];
  while (Date.now() < deadline) {
    records = await collectUntilQuiet(log, topic, 1000);
    if (done(records)) break;
  }
  return records;
}

const ids: string[] = [];

test('one workflow\'s records land on several partitions of received and decoded, keyed by request; each request is one execution', async () => {
  for (let i = 0; i < 12; i++) {
    const res = await fetch(`${service.baseUrl}/hook/wf-spread`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) });
    expect(res.status).toBe(200);
    ids.push(res.headers.get('x-request-id')!);
  }
  const executions = await recordsUntil(topics().executions, (r) => r.length >= ids.length);
  for (const [topic, records] of [[topics().received, await collectUntilQuiet(log, topics().received, 1000)], [topics().decoded, await collectUntilQuiet(log, topics().decoded, 1000)], [topics().executions, executions]] as const) {
    const name = topic === topics().received ? 'Received' : topic === topics().decoded ? 'Decoded' : 'ExecutionRequested';
    const values = records.map((r) => ({ key: r.key, partition: r.partition, value: codec.decode(name, r.value) }));
    expect(values.map((v) => v.value.requestId).sort()).toEqual([...ids].sort());
    expect(values.every((v) => v.value.workflowId === 'wf-spread' && v.key === v.value.requestId)).toBe(true);
    // 12 keys over 3 partitions all on one: about 1 in 180 000.
    expect(new Set(values.map((v) => v.partition)).size).toBeGreaterThan(1);
  }
  // Exactly one execution per request, nothing more after a quiet second.
  const requested = (await collectUntilQuiet(log, topics().executions, 1000)).map((r) => codec.decode('ExecutionRequested', r.value));
  expect(requested.map((e) => e.requestId).sort()).toEqual([...ids].sort());
  expect(new Set(requested.map((e) => e.executionId)).size).toBe(ids.length);
}, 90_000);

test('a dead letter names its workflow and keeps its source\'s key; dead-letters and replay select by the workflow in the record', async () => {
  // A received record whose trigger node the workflow does not have, keyed as the receiver keys it.
  const sent = codec.decode('Received', (await collectUntilQuiet(log, topics().received, 500))[0].value);
  const requestId = randomUUID();
  await log.append([{ topic: topics().received, key: requestId, value: codec.encode('Received', { ...sent, requestId, triggerNode: 'No such node' }) }]);
  const [letter] = await recordsUntil(topics().deadLetter, (r) => r.length > 0);
  expect(letter.key).toBe(requestId);
  expect(codec.decode('DeadLetter', letter.value)).toMatchObject({ stage: 'decoder', errorCode: 'trigger-missing', workflowId: 'wf-spread' });

  const listed = lines((await cli('dead-letters', 'list', '--workflow', 'wf-spread', '--with-source')).stdout);
  expect(listed.map((l) => [l.requestId, l.workflowId, l.sourceRecord.key])).toEqual([[requestId, 'wf-spread', requestId]]);

  const replay = await cli('replay', topics().received, '--from', '0', '--workflow', 'wf-spread');
  expect(replay.code).toBe(0);
  expect(lines(replay.stdout)[0]).toMatchObject({ replayed: ids.length + 1, interrupted: false });
  const replays = (await recordsUntil(topics().executions, (r) => r.length >= 2 * ids.length)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.replayOf !== null);
  expect(replays.map((e) => e.requestId).sort()).toEqual([...ids].sort());
}, 120_000);
