import { writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { MdnOutcome } from '../../services/platform/avro/records';
import type { EventLog } from '../../services/platform/log/event-log';
import { runCli } from './cli-process';

/**
 * A partner's asynchronous MDN endpoint on loopback: records every POST (path, headers, body) and answers
 * what `answer` says for it (200 by default). It can be closed and opened again on the same port, to be "down".
 */
export interface MdnPost { path: string; headers: IncomingHttpHeaders; body: Buffer }

export interface MdnReceiver {
  port: number;
  posts: MdnPost[];
  /** The answer to the next POSTs: status and headers. */
  answer: (post: MdnPost) => { status: number; headers?: Record<string, string> };
  /** Resolves once `count` POSTs arrived in all. */
  seen(count: number): Promise<void>;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startMdnReceiver(port = 0): Promise<MdnReceiver> {
  const posts: MdnPost[] = [];
  const waiting: { count: number; resolve(): void }[] = [];
  let server: Server | null = null;
  const receiver: MdnReceiver = {
    port,
    posts,
    answer: () => ({ status: 200 }),
    seen: (count) => new Promise<void>((resolve) => { if (posts.length >= count) resolve(); else waiting.push({ count, resolve }); }),
    async up() {
      if (server) return;
      server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const post = { path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
          posts.push(post);
          const { status, headers } = receiver.answer(post);
          res.writeHead(status, headers).end(() => {
            for (const w of waiting.filter((x) => posts.length >= x.count)) { waiting.splice(waiting.indexOf(w), 1); w.resolve(); }
          });
        });
      });
      await new Promise<void>((resolve, reject) => { server!.once('error', reject); server!.listen(receiver.port, '127.0.0.1', () => resolve()); });
      receiver.port = (server.address() as AddressInfo).port;
    },
    async down() {
      const s = server;
      server = null;
      if (s) await new Promise<void>((resolve) => { s.close(() => resolve()); s.closeAllConnections(); });
    },
    close: () => receiver.down(),
  };
  await receiver.up();
  return receiver;
}

const codec = defaultAvroCodec();

/**
 * The outcomes of a request's MDN delivery, read from the outcomes topic until `until` holds for them (a
 * final one, by default). The abort only guards against a hang: what the test asserts is the records.
 */
export async function mdnOutcomes(log: EventLog, topic: string, requestId: string, until: (o: MdnOutcome[]) => boolean = (o) => o.some((x) => x.outcome !== 'retrying'), guardMs = 45_000): Promise<MdnOutcome[]> {
  const found: MdnOutcome[] = [];
  const stop = AbortSignal.timeout(guardMs);
  try {
    for await (const record of log.read(topic, { start: { from: 'beginning' }, signal: stop })) {
      const outcome = codec.decode('MdnOutcome', record.value);
      if (outcome.requestId !== requestId) continue;
      found.push(outcome);
      if (until(found)) return found;
    }
  } catch (error) {
    if (!stop.aborted) throw error;
  }
  throw new Error(`no final MDN outcome for ${requestId} within ${guardMs} ms; seen: ${JSON.stringify(found)}`);
}

/**
 * Through the CLI of `env`: the credential `cred-async` (the receiver's key pair, asynchronous MDNs allowed to
 * `mdns`) and the workflow `wf-async`, an AS2 node that uses it; true when both puts succeeded.
 */
export async function putAsyncMdnWorkflow(env: Record<string, string>, receiver: { cert: string; key: string }, mdns: Pick<MdnReceiver, 'port'>): Promise<boolean> {
  const credential = path.join(env.DATA_DIR, 'cred-async.json');
  writeFileSync(credential, JSON.stringify({ id: 'cred-async', type: 'as2ReceiverAuth', data: { certificate: receiver.cert, privateKey: receiver.key, asyncMdnUrls: [`http://127.0.0.1:${mdns.port}/mdn`] } }));
  const workflow = path.join(env.DATA_DIR, 'wf-async.json');
  writeFileSync(workflow, JSON.stringify({ id: 'wf-async', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-async' } }] }));
  return (await runCli(['credentials', 'put', credential], env)).code === 0 && (await runCli(['workflows', 'put', workflow], env)).code === 0;
}
