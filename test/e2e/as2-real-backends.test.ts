import { readAll } from '../integration/contracts/object-store.contract';
import { startTestApp, type TestApp } from '../support/app';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { answeredEntity, as2Headers, executionsOf, postAs2, putAs2Workflow } from '../support/as2-client';

/**
 * AS2 end to end on the production adapters: Kafka (received → decoded → executions), Azurite (claim
 * checks, staged payloads, evidence) and cosmosdb-server (workflow and sealed credential), with a
 * multi-attachment message built by openssl and a signed MDN verified by openssl.
 */
let app: TestApp;
let peer: Peer;
let receiver: Party;
let partner: Party;

beforeAll(async () => {
  peer = createPeer();
  [receiver, partner] = [await peer.party('receiver'), await peer.party('partner')];
  app = await startTestApp('real', { INLINE_BODY_MAX: '4KiB', WORKFLOW_CACHE_MS: '0' });
  await putAs2Workflow(app, { workflow: 'wf-as2', credential: 'cred-as2' }, { receiver, partner }, { expectedAs2From: 'PARTNER' });
}, 120_000);
afterAll(async () => { await app?.stop(); peer?.cleanup(); });

test('a signed, compressed, encrypted two-attachment message becomes two executions and one signed MDN', async () => {
  const big = 'LIN*1*VP*4711~'.repeat(600); // past INLINE_BODY_MAX: the raw message is a claim check in Azurite
  const mixed = peer.entity({ 'Content-Type': 'multipart/mixed; boundary="att"' }, [
    '--att', 'Content-Type: application/edi-x12', 'Content-Disposition: attachment; filename="po.x12"', '', big,
    '--att', 'Content-Type: text/plain', 'Content-Disposition: attachment; filename="note.txt"', '', 'hello',
    '--att--', '',
  ].join('\r\n'));
  const signed = await peer.sign(mixed, partner, 'sha512');
  const message = await peer.encrypt(peer.compress(signed.entity).entity, receiver, '-aes192');
  const headers = as2Headers({ 'Message-Id': '<e2e-1@partner>', 'EDIINT-Features': 'multiple-attachments', 'Disposition-Notification-Options': 'signed-receipt-protocol=required, pkcs7-signature; signed-receipt-micalg=required, sha512' });
  const mdn = await postAs2(app, 'wf-as2', message, headers, peer, receiver);
  expect(mdn.signed).toBe(true);
  expect(mdn.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  expect(mdn.mic).toBe(`${await peer.digest(mixed, 'sha512')}, sha512`);

  const executions = await executionsOf(app, mdn.requestId, 2, 60_000);
  const outs = executions.map((e) => JSON.parse(e.input)['AS2 in']);
  expect(outs.map((o) => [o.as2.filename, o.as2.batchIndex, o.as2.batchSize])).toEqual([['po.x12', 0, 2], ['note.txt', 1, 2]]);
  expect((await readAll(await app.backends.store.get(outs[0].file))).toString()).toBe(big);
  // The evidence, written by the decoder from the received record: the MDN exactly as answered, and the
  // raw message (a claim check in Azurite here) behind the request's AS2 headers.
  const kept = await readAll(await app.backends.store.get(`as2/wf-as2/e2e-1@partner/${mdn.requestId}/mdn`));
  expect(kept.toString('latin1')).toContain('multipart/signed');
  expect(kept.equals(answeredEntity(mdn))).toBe(true);
  const keptMessage = await readAll(await app.backends.store.get(`as2/wf-as2/e2e-1@partner/${mdn.requestId}/message`));
  expect(keptMessage.subarray(keptMessage.indexOf('\r\n\r\n') + 4).equals(message.body)).toBe(true);
  expect(keptMessage.toString('latin1')).toContain('message-id: <e2e-1@partner>');
}, 90_000);

test('an attachment whose Content-Type is not a plain type/subtype (a control character in it) is staged and reported as application/octet-stream, not as each store would mend it', async () => {
  // Before: the workflow was told "text/pl\rain" while Azure kept "text/plain" (and the filesystem store, the \r).
  const odd = peer.entity({ 'Content-Type': 'text/pl\rain' }, 'ISA*odd~');
  const signed = await peer.sign(odd, partner, 'sha256');
  const message = await peer.encrypt(signed.entity, receiver, '-aes256');
  const mdn = await postAs2(app, 'wf-as2', message, as2Headers({ 'Message-Id': '<e2e-odd-type@partner>' }), peer, receiver);
  expect(mdn.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  const [execution] = await executionsOf(app, mdn.requestId, 1, 60_000);
  const out = JSON.parse(execution.input)['AS2 in'];
  expect(out.as2.contentType).toBe('application/octet-stream');
  expect((await readAll(await app.backends.store.get(out.file))).toString()).toBe('ISA*odd~');
  expect((await app.backends.store.head(out.file))?.contentType).toBe('application/octet-stream');
}, 90_000);
