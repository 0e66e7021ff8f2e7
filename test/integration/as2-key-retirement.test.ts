import { X509Certificate } from 'node:crypto';
import * as http from 'node:http';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { parseCredentialDocument } from '../../services/platform/registry/documents';
import { startTestApp, type TestApp } from '../support/app';
import { ADMIN_TOKENS, FULL_TOKEN, startAdminApi, type AdminApiHandle } from '../support/admin-api';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { as2Headers, executionsOf, postAs2 } from '../support/as2-client';

/**
 * Key rotation and the received log: a message answered `processed` stays decodable after the key it was
 * encrypted to, and the partner certificate it was signed with, are removed by a `credentials put` — when the
 * decoder reaches it later, and when a data team replays it. Over real HTTP on the embedded backends, through
 * the management API's put (as the CLI does while the service runs); messages built with `openssl cms`.
 */
let app: TestApp;
let api: AdminApiHandle;
let peer: Peer;
let receiverOld: Party;
let receiverNew: Party;
let partnerOld: Party;
let partnerNew: Party;

const EDI = 'ISA*00*          *00*          *ZZ*PARTNER        *ZZ*INGRESS        *261127*0600*U*00401*000000001*0*P*>~ST*850*0001~SE*2*0001~';
const payload = () => peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, EDI);
const signedEncrypted = async (signer: Party, recipient: Party) => peer.encrypt((await peer.sign(payload(), signer)).entity, recipient, '-aes256');
const pair = (p: Party) => ({ certificate: p.cert, privateKey: p.key });
const putCredential = (data: object, query = '') => api.call('PUT', `/api/v1/credentials/cred-retire${query}`, { body: { type: 'as2ReceiverAuth', data } });

/** A range replay of the workflow's received records; `from` differs per call, since the same request is not run twice. */
async function replayWorkflow(from: number | string): Promise<void> {
  const started = await api.call('POST', '/api/v1/replays', { body: { topic: app.topics.received, from, workflow: 'wf-retire' } });
  expect(started.status).toBe(202);
  let job = started.body;
  while (job.state === 'running') job = (await api.call('GET', `/api/v1/replays/${job.id}`)).body;
  expect(job).toMatchObject({ state: 'complete', replayed: 1 });
}

async function deadLetters(): Promise<any[]> {
  return (await api.call('GET', '/api/v1/dead-letters?stage=decoder&workflow=wf-retire')).body.deadLetters;
}

beforeAll(async () => {
  peer = createPeer();
  [receiverOld, receiverNew, partnerOld, partnerNew] = await Promise.all(['retire-receiver-old', 'retire-receiver-new', 'retire-partner-old', 'retire-partner-new'].map((n) => peer.party(n)));
  // Caches off: a put is seen by the next message and the next decode (in production, within WORKFLOW_CACHE_MS).
  app = await startTestApp('embedded', { ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0' });
  api = await startAdminApi(app);
  expect((await putCredential({ ...pair(receiverOld), partnerCertificate: partnerOld.cert })).status).toBe(201);
  expect((await api.call('PUT', '/api/v1/workflows/wf-retire', { body: { active: true, nodes: [{ name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth' }, credentials: { as2ReceiverAuth: 'cred-retire' } }] } })).status).toBe(201);
}, 60_000);
afterAll(async () => { await api?.stop(); await app?.stop(); peer?.cleanup(); });

test('after the old key and certificate are removed, a message accepted with them replays into the same execution; new ones to the old key are refused; --forget-retired drops them', async () => {
  const accepted = await postAs2(app, 'wf-retire', signedEncrypted(partnerOld, receiverOld), as2Headers(), peer, receiverOld);
  expect(accepted.disposition).toBe('automatic-action/MDN-sent-automatically; processed');
  const [original] = await executionsOf(app, accepted.requestId);

  // Rotation's last step: the new generation only.
  const rotated = await putCredential({ receiverKeys: [pair(receiverNew)], partnerCertificates: [partnerNew.cert] });
  expect(rotated.status).toBe(200);
  const fingerprints = (rotated.body.retiredCertificates as any[]).map((c) => [c.role, c.field, c.fingerprint]);
  expect(fingerprints).toEqual([
    ['receiver', 'retiredReceiverKeys[0].certificate', new X509Certificate(receiverOld.cert).fingerprint256],
    ['partner', 'retiredPartnerCertificates[0].certificate', new X509Certificate(partnerOld.cert).fingerprint256],
  ]);
  expect(rotated.body.certificates.map((c: any) => c.field)).toEqual(['receiverKeys[0].certificate', 'partnerCertificates[0]']);
  expect(rotated.text).not.toMatch(/PRIVATE KEY|BEGIN CERTIFICATE/);

  // The receiver no longer takes the old generation.
  expect((await postAs2(app, 'wf-retire', signedEncrypted(partnerNew, receiverOld), as2Headers(), peer, receiverNew)).disposition).toMatch(/processed\/error: decryption-failed$/);
  expect((await postAs2(app, 'wf-retire', signedEncrypted(partnerOld, receiverNew), as2Headers(), peer, receiverNew)).disposition).toMatch(/processed\/error: authentication-failed$/);

  // The accepted message replays: opened with the retired key, its signature checked against the retired certificate.
  await replayWorkflow(0);
  const both = await executionsOf(app, accepted.requestId, 2);
  const replayed = both.find((e) => e.replayOf !== null)!;
  expect(replayed.executionId).toBe(original.executionId);
  expect(JSON.parse(replayed.input)['AS2 in'].as2.filename).toBe('po.x12');
  expect(await deadLetters()).toEqual([]);

  // Giving the retired fields in a put is refused; forgetting them is explicit.
  const given = await putCredential({ receiverKeys: [pair(receiverNew)], retiredReceiverKeys: [{ ...pair(receiverOld), retiredAt: new Date().toISOString() }] });
  expect(given.status).toBe(400);
  expect(given.body.problems).toEqual([expect.stringMatching(/^data\.retiredReceiverKeys is kept by the service/)]);
  expect((await putCredential({ receiverKeys: [pair(receiverNew)], partnerCertificates: [partnerNew.cert] }, '?forgetRetired=maybe')).status).toBe(400);
  const forgot = await putCredential({ receiverKeys: [pair(receiverNew)], partnerCertificates: [partnerNew.cert] }, '?forgetRetired=true');
  expect(forgot.status).toBe(200);
  expect(forgot.body.retiredCertificates).toBeUndefined();

  // Now the old message no longer opens: a dead letter saying why, replayable once the key is put back.
  await replayWorkflow('2026-01-01T00:00:00Z');
  let letters: any[] = [];
  while (letters.length === 0) letters = await deadLetters();
  expect(letters).toHaveLength(1);
  expect(JSON.stringify(letters[0])).toMatch(/payload-parse-error/);
  expect(JSON.stringify(letters[0])).toMatch(/cannot be opened/);
}, 120_000);

test('two puts of one credential at once each keep what the other removed (a compare-and-set), and a put over a version it did not read is refused', async () => {
  const fingerprint = (p: Party) => new X509Certificate(p.cert).fingerprint256;
  const put = (id: string, certs: Party[], headers: Record<string, string> = {}) => api.call('PUT', `/api/v1/credentials/${id}`, { headers, body: { type: 'as2ReceiverAuth', data: { receiverKeys: [pair(receiverNew)], partnerCertificates: certs.map((c) => c.cert) } } });
  // Five rounds: without the compare-and-set the two puts read the same version in most of them.
  for (let round = 0; round < 5; round++) {
    const id = `cred-race-${round}`;
    expect((await put(id, [partnerOld])).status).toBe(201);
    const answers = await Promise.all([put(id, [partnerNew]), put(id, [receiverOld])]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const meta = (await api.call('GET', `/api/v1/credentials/${id}`)).body;
    const current = meta.certificates.find((c: any) => c.role === 'partner').fingerprint;
    const other = current === fingerprint(partnerNew) ? receiverOld : partnerNew;
    expect(meta.retiredCertificates.filter((c: any) => c.role === 'partner').map((c: any) => c.fingerprint).sort()).toEqual([fingerprint(partnerOld), fingerprint(other)].sort());
  }

  // If-Match: only over the version read. A put in between makes the reader's put a 412 that changes nothing.
  const read = await api.call('GET', '/api/v1/credentials/cred-race-0');
  const etag = read.headers.get('etag')!;
  expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
  expect(read.headers.get('content-type')).toBe('application/json; charset=utf-8');
  // Never 304: the answer's daysToExpiry moves on while the stored version stays (node:http: fetch would add no-cache).
  const conditional = await new Promise<number>((resolve, reject) => {
    http.get(`${api.url}/api/v1/credentials/cred-race-0`, { headers: { authorization: `Bearer ${FULL_TOKEN}`, 'if-none-match': etag } }, (res) => { res.resume(); resolve(res.statusCode!); }).on('error', reject);
  });
  expect(conditional).toBe(200);
  const between = await put('cred-race-0', [partnerNew]);
  expect(between.status).toBe(200);
  expect(between.headers.get('etag')).not.toBe(etag);
  const stale = await put('cred-race-0', [partnerOld], { 'if-match': etag });
  expect({ status: stale.status, error: stale.body.error, etag: stale.headers.get('etag') }).toEqual({ status: 412, error: 'precondition-failed', etag: between.headers.get('etag') });
  expect((await api.call('GET', '/api/v1/credentials/cred-race-0')).body.certificates.find((c: any) => c.role === 'partner').fingerprint).toBe(fingerprint(partnerNew));
  expect((await put('cred-race-0', [partnerOld], { 'if-match': between.headers.get('etag')! })).status).toBe(200);
  expect((await put('cred-race-0', [partnerOld], { 'if-none-match': '*' })).status).toBe(412);
  expect((await put('cred-race-new', [partnerOld], { 'if-none-match': '*' })).status).toBe(201);
  expect((await put('cred-race-none', [partnerOld], { 'if-match': '*' })).status).toBe(412);
  expect(await app.backends.registry.credentials.get('cred-race-none')).toBeNull();
  const malformed = await put('cred-race-0', [partnerOld], { 'if-match': 'not-a-tag' });
  expect({ status: malformed.status, message: malformed.body.message }).toEqual({ status: 400, message: 'If-Match takes * or a list of entity tags ("…")' });
  // A delete over a version it did not read is refused too.
  expect((await api.call('DELETE', '/api/v1/credentials/cred-race-new', { headers: { 'if-match': etag } })).status).toBe(412);
  expect((await api.call('DELETE', '/api/v1/credentials/cred-race-new', { headers: { 'if-match': (await api.call('GET', '/api/v1/credentials/cred-race-new')).headers.get('etag')! } })).status).toBe(204);
}, 60_000);

test('a certificate of ours with a malformed key identifier, stored before put refused it, does not block putting the credential again (a rotation); a new one is refused', async () => {
  const odd = await peer.certificate('retire-odd-ski', ['-subj', '/CN=retire-odd-ski', '-addext', 'subjectKeyIdentifier=DER:04:02:AB:CD:00:00']);
  const cut = await peer.certificate('retire-cut-ski', ['-subj', '/CN=retire-cut-ski', '-addext', 'subjectKeyIdentifier=DER:04:05:AB:CD']);
  // As if from before the check: written to the registry, sealed, as `credentials put` stored it then.
  await app.backends.registry.credentials.put(createCredentialSealer(app.config.encryptionKey!).seal(parseCredentialDocument({ id: 'cred-odd-stored', type: 'as2ReceiverAuth', data: { ...pair(odd), partnerCertificate: partnerOld.cert } })));
  const put = (data: object) => api.call('PUT', '/api/v1/credentials/cred-odd-stored', { body: { type: 'as2ReceiverAuth', data } });
  // Rotation's first step: the new key pair beside the stored one.
  expect((await put({ receiverKeys: [pair(odd), pair(receiverNew)], partnerCertificate: partnerOld.cert })).status).toBe(200);
  // Rotation's last step (the odd one retired), then putting it back: still the stored one, not new.
  expect((await put({ receiverKeys: [pair(receiverNew)], partnerCertificate: partnerOld.cert })).status).toBe(200);
  expect((await put({ receiverKeys: [pair(receiverNew), pair(odd)], partnerCertificate: partnerOld.cert })).status).toBe(200);
  // A new one of ours with such a key identifier is refused, naming it; a partner's is taken.
  const refused = await put({ receiverKeys: [pair(receiverNew), pair(odd), pair(cut)], partnerCertificate: partnerOld.cert });
  expect({ status: refused.status, error: refused.body.error, problems: refused.body.problems }).toEqual({ status: 400, error: 'invalid-document', problems: [expect.stringMatching(/^data\.receiverKeys\[2\]\.certificate has a subjectKeyIdentifier extension whose value cannot be read/)] });
  expect((await put({ receiverKeys: [pair(receiverNew), pair(odd)], partnerCertificates: [partnerOld.cert, cut.cert] })).status).toBe(200);
});
