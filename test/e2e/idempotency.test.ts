import { writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { TOPIC_NAMES } from '../../services/platform/log/topics';
import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from '../support/cli-process';
import { PipelineCluster, until } from '../support/pipeline-cluster';

/**
 * Idempotency keys (DESIGN.md §5 `idempotencyKey`): a request repeating the key of an accepted one within the
 * window is answered like an accept and starts nothing. Asserted on what the pipeline wrote: one execution per
 * key, the repeat marked in the received and decoded records. On the embedded log through `kill -9` and a
 * restart of the whole service; on Kafka with two receivers taking the same requests at once, and a decoder
 * killed and restarted (its keys recovered from the received topic).
 */
const codec = defaultAvroCodec();

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; requestId: string; text: string }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, requestId: res.headers.get('x-request-id') ?? '', text: await res.text() };
}

describe('on the embedded log', () => {
  test('a repeated key starts nothing, through kill -9 and a restart; header, JSON path and webhook-id keys; the repeat is marked in the log', async () => {
    const { env, cleanup } = backendEnv('embedded');
    let service: ServiceProcess | null = null;
    try {
      const workflows = [
        { id: 'wf-idem-header', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'Idempotency-Key' }, responseData: '{"ok":true}' } } }] },
        { id: 'wf-idem-json', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { json: 'order.id' }, idempotencyWindowHours: 48 } } }] },
        { id: 'wf-idem-sw', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { standardWebhooks: true } } } }] },
      ];
      for (const wf of workflows) {
        const file = path.join(env.DATA_DIR, `${wf.id}.json`);
        writeFileSync(file, JSON.stringify(wf));
        const put = await runCli(['workflows', 'put', file], env);
        expect([put.code, put.stderr]).toEqual([0, '']);
      }
      service = await startServiceProcess(env);
      const hook = (id: string) => `${service!.baseUrl}/hook/${id}`;
      const key = new Map<string, string>(); // requestId → the key it carried ('' for none)
      const send = async (id: string, body: unknown, headers: Record<string, string>, k: string) => {
        const answer = await post(hook(id), body, headers);
        expect(answer.status).toBe(200);
        key.set(answer.requestId, `${id}:${k}`);
        return answer;
      };

      const first = await send('wf-idem-header', { n: 1 }, { 'idempotency-key': 'k1' }, 'k1');
      const repeat = await send('wf-idem-header', { n: 2 }, { 'idempotency-key': 'k1' }, 'k1');
      expect(repeat.text).toBe(first.text); // answered like an accept, Response Data and all
      expect(JSON.parse(repeat.text)).toEqual({ ok: true });
      await send('wf-idem-header', { n: 3 }, { 'idempotency-key': 'k2' }, 'k2');
      await send('wf-idem-header', { n: 4 }, {}, `none-${1}`); // no key: executed as usual
      await send('wf-idem-header', { n: 5 }, {}, `none-${2}`);
      await send('wf-idem-json', { order: { id: 7 } }, {}, '7');
      await send('wf-idem-json', { order: { id: 7 }, again: true }, {}, '7');
      await send('wf-idem-json', { order: { id: 8 } }, {}, '8');
      await send('wf-idem-sw', { a: 1 }, { 'webhook-id': 'msg_1' }, 'msg_1');
      await send('wf-idem-sw', { a: 1 }, { 'webhook-id': 'msg_1' }, 'msg_1');

      // Everything decoded before the kill, so the restarted decoder must recover its keys from the log.
      const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
      const decodedNow = () => collectUntilQuiet(log, TOPIC_NAMES.decoded, 500).then((r) => r.length);
      await until('every request decoded', decodedNow, (n) => n >= key.size, 30_000);
      service.child.kill('SIGKILL');
      await waitForExit(service.child);
      service = await startServiceProcess(env);
      await send('wf-idem-header', { n: 6 }, { 'idempotency-key': 'k1' }, 'k1');
      await send('wf-idem-json', { order: { id: 8 } }, {}, '8');
      await send('wf-idem-header', { n: 7 }, { 'idempotency-key': 'k3' }, 'k3');

      const executionsNow = async () => (await collectUntilQuiet(log, TOPIC_NAMES.executions, 700)).map((r) => codec.decode('ExecutionRequested', r.value));
      await until('every request decoded after the restart', decodedNow, (n) => n >= key.size, 30_000);
      const executions = await executionsNow();
      const perKey = new Map<string, number>();
      for (const e of executions) perKey.set(key.get(e.requestId) ?? `unknown:${e.requestId}`, (perKey.get(key.get(e.requestId) ?? `unknown:${e.requestId}`) ?? 0) + 1);
      expect(Object.fromEntries(perKey)).toEqual({
        'wf-idem-header:k1': 1, 'wf-idem-header:k2': 1, 'wf-idem-header:k3': 1, 'wf-idem-header:none-1': 1, 'wf-idem-header:none-2': 1,
        'wf-idem-json:7': 1, 'wf-idem-json:8': 1, 'wf-idem-sw:msg_1': 1,
      });
      expect(executions.find((e) => e.requestId === repeat.requestId)).toBeUndefined();

      // The repeat is marked: by the receiver that remembered the key, and by the decoder that decided.
      const received = (await collectUntilQuiet(log, TOPIC_NAMES.received, 300)).map((r) => codec.decode('Received', r.value));
      expect(received.find((r) => r.requestId === repeat.requestId)).toMatchObject({ idempotencyKey: 'k1', duplicateOf: first.requestId });
      expect(received.find((r) => r.requestId === first.requestId)).toMatchObject({ idempotencyKey: 'k1', duplicateOf: null });
      const decoded = (await collectUntilQuiet(log, TOPIC_NAMES.decoded, 300)).map((r) => codec.decode('Decoded', r.value));
      expect(decoded.find((d) => d.requestId === repeat.requestId)).toMatchObject({ duplicateOf: first.requestId, items: [] });
      // After the restart the receiver remembers nothing; the decoder still knows k1 from the log.
      const afterRestart = decoded.filter((d) => key.get(d.requestId) === 'wf-idem-header:k1').slice(-1)[0];
      expect(afterRestart).toMatchObject({ duplicateOf: first.requestId, items: [] });
      await log.close();
    } finally {
      if (service) { service.child.kill('SIGKILL'); await waitForExit(service.child); }
      cleanup();
    }
  }, 120_000);

  test('workflows put refuses a malformed idempotency option with a precise message', async () => {
    const { env, cleanup } = backendEnv('embedded');
    try {
      const file = path.join(env.DATA_DIR, 'bad.json');
      writeFileSync(file, JSON.stringify({ id: 'wf-bad', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'bad header' }, idempotencyWindowHours: 0 } } }] }));
      const put = await runCli(['workflows', 'put', file], env);
      expect(put.code).not.toBe(0);
      expect(put.stderr).toMatch(/idempotencyKey must be/);
      expect(put.stderr).toMatch(/idempotencyWindowHours must be a number of hours above 0/);
    } finally {
      cleanup();
    }
  }, 60_000);
});

describe('on Kafka', () => {
  test('identical requests racing on two receivers, and repeats after a decoder is killed and restarted: one execution per key', async () => {
    const { env, cleanup } = backendEnv('real', { KAFKA_TOPIC_PARTITIONS: '4', KAFKA_SESSION_TIMEOUT_MS: '6000', KAFKA_HEARTBEAT_INTERVAL_MS: '1000', RECORD_KEY: 'request' });
    let cluster: PipelineCluster | null = null;
    try {
      cluster = await PipelineCluster.create(env, ['wf-idem'], { name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { header: 'Idempotency-Key' } } } });
      const c = cluster;
      for (const role of ['receiver', 'receiver', 'decoder', 'decoder', 'dispatcher'] as const) await c.start(role);
      await c.waitReady();
      const executions = await c.watchExecutions();
      const key = new Map<string, string>();
      const answers: number[] = [];
      const race = async (k: string, urls: string[]) => {
        const sent = await Promise.all(urls.map((u) => post(`${u}/hook/wf-idem`, { k }, { 'idempotency-key': k })));
        for (const s of sent) { answers.push(s.status); key.set(s.requestId, k); }
      };
      const keys = Array.from({ length: 40 }, (_, i) => `order-${i}`);
      for (let i = 0; i < keys.length; i += 8) await Promise.all(keys.slice(i, i + 8).map((k) => race(k, c.receiverUrls())));
      const executedKeys = () => new Set([...executions.perRequest.keys()].map((r) => key.get(r)));
      await until('an execution for each key', () => executedKeys().size, (n) => n >= keys.length, 90_000);

      const [decoder] = c.byRole('decoder');
      await c.kill(decoder, 'SIGKILL');
      await c.restart(decoder);
      await c.waitReady();
      const more = Array.from({ length: 10 }, (_, i) => `order-new-${i}`);
      // Each repeat to one receiver, alternating, so repeats cross receivers as well as the restart.
      for (let i = 0; i < keys.length; i += 8) await Promise.all(keys.slice(i, i + 8).map((k, j) => race(k, [c.receiverUrls()[(i + j) % 2]])));
      await Promise.all(more.map((k) => race(k, c.receiverUrls())));
      await until('an execution for each new key', () => executedKeys().size, (n) => n >= keys.length + more.length, 90_000);
      await until('both stages caught up', async () => (await c.lag('decoder')) + (await c.lag('dispatcher')), (lag) => lag === 0, 90_000);
      await until('no execution arriving for 3 s', () => Date.now() - executions.lastRecordAt, (quiet) => quiet > 3_000, 30_000);
      await executions.stop();

      expect(answers.filter((s) => s !== 200)).toEqual([]);
      const perKey = new Map<string, number>();
      for (const [requestId, n] of executions.perRequest) perKey.set(key.get(requestId) ?? `unknown:${requestId}`, (perKey.get(key.get(requestId) ?? `unknown:${requestId}`) ?? 0) + n);
      const notOnce = [...perKey].filter(([, n]) => n !== 1);
      expect({ keys: perKey.size, notOnce }).toEqual({ keys: keys.length + more.length, notOnce: [] });
      expect(key.size).toBe(keys.length * 3 + more.length * 2); // every request answered, each with its own id
    } finally {
      await cluster?.close();
      cleanup();
    }
  }, 240_000);
});
