import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { crashMarksIn, recordDigest } from '../../services/platform/log/crash-guard';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { collectUntilQuiet } from '../support/log-reads';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Peer } from '../support/as2-peer';
import { as2Headers } from '../support/as2-client';
import { deadLetterOf } from '../support/executions';
import { mdnOutcomes, startMdnReceiver, type MdnReceiver } from '../support/mdn-receiver';

/**
 * An AS2 message answered `processed` with an asynchronous MDN owes that MDN whatever becomes of its record. One
 * the crash guard dead-letters `stage-crashed` (platform/log/crash-guard.ts) is never handed to the decoder's
 * handler, which is where a delivery is worked out: it is worked out with the dead letter instead. The crash is
 * planted as the mark a life that ended with the record alone in hand a second time leaves, between two starts
 * of one DATA_DIR.
 */
const codec = defaultAvroCodec();
let peer: Peer;
let mdns: MdnReceiver;
let dataDir: string;
const apps: TestApp[] = [];
beforeAll(async () => { peer = createPeer(); mdns = await startMdnReceiver(); dataDir = mkdtempSync(path.join(tmpdir(), 'as2-crashed-')); });
afterAll(async () => {
  for (const app of apps) { await app.stopServices(); await app.backends.close(); }
  await mdns?.close();
  peer?.cleanup();
  rmSync(dataDir, { recursive: true, force: true });
});

test('a record dead-lettered stage-crashed still sends the asynchronous MDN its message was promised', async () => {
  const env = { DATA_DIR: dataDir, WORKFLOW_CACHE_MS: '0', AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms' };
  // First life: the receiver alone, so the record waits for a decoder.
  const first = await startTestApp('embedded', env, ['receiver']);
  apps.push(first);
  const [receiver, partner] = [await peer.party('receiver'), await peer.party('partner')];
  const data = { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert, asyncMdnUrls: [`http://127.0.0.1:${mdns.port}/as2/mdn`] };
  await first.backends.registry.credentials.put(createCredentialSealer(first.config.encryptionKey!).seal({ id: 'cred-crashed', type: 'as2ReceiverAuth', data }));
  await first.backends.registry.workflows.put({ id: 'wf-crashed', active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-crashed' } }] });
  const part = peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, 'ISA*00*~');
  const built = await peer.encrypt((await peer.sign(part, partner, 'sha256')).entity, receiver, '-aes256');
  const headers = as2Headers({ 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/as2/mdn` });
  const res = await fetch(`${first.baseUrl}/hook/wf-crashed`, { method: 'POST', headers: { ...headers, 'Content-Type': built.contentType }, body: built.body });
  expect(res.status).toBe(200);
  const requestId = res.headers.get('x-request-id')!;
  const [record] = (await collectUntilQuiet(first.backends.log, first.topics.received, 300)).filter((r) => codec.decode('Received', r.value).requestId === requestId);
  // What a life that ended with this record alone in the decoder's hands, after an earlier one had (a strike),
  // leaves behind.
  const marks = crashMarksIn(first.backends.store);
  const { version } = await marks.readVersioned(first.topics.group('decoder'), record.topic, record.partition);
  expect(await marks.swap(first.topics.group('decoder'), record.topic, record.partition, {
    from: record.offset, record: recordDigest(record), to: record.offset, alone: true, strikes: 1, writer: 'a life that ended', at: Date.now(),
  }, version)).not.toBeNull();
  await first.stopServices();
  await first.backends.close();
  apps.splice(0);

  const second = await startTestApp('embedded', env);
  apps.push(second);
  const letter = await deadLetterOf(second, requestId);
  expect([letter.stage, letter.errorCode]).toEqual(['decoder', 'stage-crashed']);
  const outcomes = await mdnOutcomes(second.backends.log, second.topics.mdnOutcomes, requestId);
  expect(outcomes.map((o) => [o.outcome, o.status])).toEqual([['delivered', 200]]);
  expect(mdns.posts.filter((p) => p.body.toString('latin1').includes(headers['Message-Id']))).toHaveLength(1);
});
