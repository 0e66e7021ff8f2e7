import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { credentialPutProblems, DocumentError, parseCredentialDocument, type CredentialDocument } from '../../services/platform/registry/documents';
import { datedCertificate, rsaKey } from '../support/dated-certificates';
import { createAs2Trigger } from '../../services/triggers/as2/as2-trigger';
import { as2PutProblems, checkCredentialDocument } from '../../services/admin/operations/documents';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { evidenceFolder, messageFolder } from '../../services/triggers/as2/evidence';
import { createPeer, type Peer } from '../support/as2-peer';

/** `credentials put` and `workflows put` checks for AS2. */
let peer: Peer;
beforeAll(() => { peer = createPeer(); });
afterAll(() => peer.cleanup());

const problemsOf = (fn: () => unknown) => { try { fn(); } catch (e) { if (e instanceof DocumentError) return e.problems; throw e; } return []; };

test('as2ReceiverAuth PEMs must be readable and the key must be the certificate\'s', async () => {
  const [a, b] = [await peer.party('a'), await peer.party('b')];
  const doc = (data: Record<string, string>) => ({ id: 'cred-as2', type: 'as2ReceiverAuth', data });
  expect(parseCredentialDocument(doc({ certificate: a.cert, privateKey: a.key, partnerCertificate: b.cert })).type).toBe('as2ReceiverAuth');
  const broken = '-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----';
  expect(problemsOf(() => parseCredentialDocument(doc({ certificate: broken, privateKey: '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----', partnerCertificate: broken })))).toEqual([
    'data.certificate is not a readable X.509 certificate',
    'data.privateKey is not a readable unencrypted private key',
    'data.partnerCertificate is not a readable X.509 certificate',
  ]);
  const mismatch = problemsOf(() => parseCredentialDocument(doc({ certificate: a.cert, privateKey: b.key })));
  expect(mismatch).toEqual(['data.privateKey is not the private key of data.certificate']);
  expect(JSON.stringify(mismatch)).not.toContain('PRIVATE KEY');
});

test.each([['ed25519', []], ['rsa-pss', ['-pkeyopt', 'rsa_keygen_bits:2048']]])('an AS2 receiver key of type %s is refused: MDNs signed with it would fail or not verify', (type, options) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'as2-key-'));
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', type, ...options, '-nodes', '-subj', '/CN=receiver', '-days', '1', '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem')], { stdio: 'ignore' });
    const data = { certificate: readFileSync(path.join(dir, 'c.pem'), 'utf8'), privateKey: readFileSync(path.join(dir, 'k.pem'), 'utf8') };
    expect(problemsOf(() => parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data }))).toEqual([`data.privateKey is a ${type} key: the AS2 receiver key must be RSA or EC`]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an AS2 node needs AS2 Receiver Auth and a credential; HTTP-only options are refused', () => {
  const plugin = createAs2Trigger();
  expect(plugin.validateNode!({ name: 'In', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', expectedAs2From: 'ACME' }, credentials: { as2ReceiverAuth: 'c' } })).toEqual([]);
  expect(plugin.validateNode!({ name: 'In', type: 'webhook', parameters: { protocol: 'as2', authentication: 'basicAuth', expectedAs2To: 42, options: { rawBody: true } }, credentials: { basicAuth: 'c' } })).toEqual([
    'node "In".parameters.authentication must be as2ReceiverAuth when the protocol is as2',
    'node "In".credentials.as2ReceiverAuth must name the AS2 receiver credential',
    'node "In".parameters.expectedAs2To must be a single-line string or null',
    'node "In".parameters.options.rawBody does not apply to AS2 (the answer is an MDN and payloads are always stored)',
  ]);
});

describe('as2ReceiverAuth with several certificates (rotation): partnerCertificates and receiverKeys', () => {
  const doc = (data: Record<string, unknown>) => ({ id: 'cred-as2', type: 'as2ReceiverAuth', data });
  const broken = '-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----';

  test('the arrays alone, the single fields alone, or both are accepted', async () => {
    const [a, b, c] = [await peer.party('a'), await peer.party('b'), await peer.party('c')];
    const arrays = { partnerCertificates: [b.cert, c.cert], receiverKeys: [{ certificate: a.cert, privateKey: a.key }, { certificate: c.cert, privateKey: c.key }] };
    expect(problemsOf(() => parseCredentialDocument(doc(arrays)))).toEqual([]);
    expect(problemsOf(() => parseCredentialDocument(doc({ certificate: a.cert, privateKey: a.key })))).toEqual([]);
    expect(problemsOf(() => parseCredentialDocument(doc({ certificate: a.cert, privateKey: a.key, partnerCertificate: b.cert, ...arrays })))).toEqual([]);
    // The single pair alone with an empty receiverKeys is still a receiver key.
    expect(problemsOf(() => parseCredentialDocument(doc({ certificate: a.cert, privateKey: a.key, receiverKeys: [], partnerCertificates: [] })))).toEqual([]);
  });

  test('every entry is checked like the single fields, and named by its index; no PEM is quoted', async () => {
    const [a, b] = [await peer.party('a'), await peer.party('b')];
    const problems = problemsOf(() => parseCredentialDocument(doc({
      partnerCertificates: [b.cert, broken, 'not a pem', 42],
      receiverKeys: [
        { certificate: a.cert, privateKey: a.key },
        { certificate: a.cert, privateKey: b.key },
        { certificate: broken, privateKey: '-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----' },
        { certificate: a.cert },
        'a.pem',
      ],
    })));
    expect(problems).toEqual([
      'data.receiverKeys[1].privateKey is not the private key of data.receiverKeys[1].certificate',
      'data.receiverKeys[2].certificate is not a readable X.509 certificate',
      'data.receiverKeys[2].privateKey is not a readable unencrypted private key',
      'data.receiverKeys[3].privateKey must be a PEM block (-----BEGIN (RSA |ENCRYPTED )?PRIVATE KEY-----)',
      'data.receiverKeys[4] must be an object with "certificate" and "privateKey"',
      'data.partnerCertificates[1] is not a readable X.509 certificate',
      'data.partnerCertificates[2] must be a PEM block (-----BEGIN CERTIFICATE-----)',
      'data.partnerCertificates[3] must be a PEM block (-----BEGIN CERTIFICATE-----)',
    ]);
    expect(JSON.stringify(problems)).not.toContain('BEGIN PRIVATE KEY-----\n');
  });

  test('no receiver key at all, a half single pair, and arrays of the wrong shape are refused', async () => {
    const a = await peer.party('a');
    expect(problemsOf(() => parseCredentialDocument(doc({ partnerCertificates: [a.cert] })))).toEqual([
      'data.certificate must be a PEM block (-----BEGIN CERTIFICATE-----)',
      'data.privateKey must be a PEM block (-----BEGIN (RSA |ENCRYPTED )?PRIVATE KEY-----)',
    ]);
    expect(problemsOf(() => parseCredentialDocument(doc({ receiverKeys: [] })))).toEqual(['data.receiverKeys must hold at least one key pair when data.certificate is not given']);
    expect(problemsOf(() => parseCredentialDocument(doc({ certificate: a.cert, receiverKeys: [{ certificate: a.cert, privateKey: a.key }] })))).toEqual([
      'data.privateKey must be a PEM block (-----BEGIN (RSA |ENCRYPTED )?PRIVATE KEY-----)',
    ]);
    expect(problemsOf(() => parseCredentialDocument(doc({ receiverKeys: { certificate: a.cert, privateKey: a.key }, partnerCertificates: a.cert })))).toEqual([
      'data.receiverKeys must be an array of {"certificate","privateKey"} objects',
      'data.partnerCertificates must be an array of PEM certificates',
    ]);
  });

  test.each([['ed25519', []], ['rsa-pss', ['-pkeyopt', 'rsa_keygen_bits:2048']]])('a receiverKeys key of type %s is refused like the single one', async (type, options) => {
    const a = await peer.party('a');
    const dir = mkdtempSync(path.join(tmpdir(), 'as2-key-'));
    try {
      execFileSync('openssl', ['req', '-x509', '-newkey', type, ...options, '-nodes', '-subj', '/CN=receiver', '-days', '1', '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem')], { stdio: 'ignore' });
      const receiverKeys = [{ certificate: a.cert, privateKey: a.key }, { certificate: readFileSync(path.join(dir, 'c.pem'), 'utf8'), privateKey: readFileSync(path.join(dir, 'k.pem'), 'utf8') }];
      expect(problemsOf(() => parseCredentialDocument(doc({ receiverKeys })))).toEqual([`data.receiverKeys[1].privateKey is a ${type} key: the AS2 receiver key must be RSA or EC`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

test('credentials put refuses a role whose every certificate has expired; one not yet valid, or an expired one beside a current one, is fine', () => {
  const key = rsaKey();
  const at = Date.parse('2026-06-01T00:00:00Z');
  const made = (from: string, to: string, serial: string) => datedCertificate(`c${serial}`, new Date(from), new Date(to), key, serial).cert;
  const old = made('2019-01-01T00:00:00Z', '2020-01-01T00:00:00Z', '01');
  const older = made('2018-01-01T00:00:00Z', '2019-01-01T00:00:00Z', '02');
  const current = made('2025-01-01T00:00:00Z', '2099-01-01T00:00:00Z', '03');
  const future = made('2027-01-01T00:00:00Z', '2099-01-01T00:00:00Z', '04');
  const put = (data: Record<string, unknown>) => credentialPutProblems(parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data }), at);
  expect(put({ certificate: current, privateKey: key, partnerCertificate: current })).toEqual([]);
  expect(put({ certificate: old, privateKey: key, receiverKeys: [{ certificate: older, privateKey: key }], partnerCertificate: current })).toEqual([
    'every receiver certificate has expired (the last on 2020-01-01T00:00:00.000Z): no message encrypted to this credential could be opened, and partners would refuse its MDN signatures; add a current key pair',
  ]);
  expect(put({ certificate: current, privateKey: key, partnerCertificate: old, partnerCertificates: [older] })).toEqual([
    'every partner certificate has expired (the last on 2020-01-01T00:00:00.000Z): no signature of this partner could be accepted; add its current certificate',
  ]);
  expect(put({ certificate: old, privateKey: key, receiverKeys: [{ certificate: current, privateKey: key }], partnerCertificate: old, partnerCertificates: [future] })).toEqual([]);
  expect(put({ certificate: future, privateKey: key })).toEqual([]);
  // Other credential types have no certificates to lapse.
  expect(credentialPutProblems(parseCredentialDocument({ id: 'h', type: 'headerAuth', data: { name: 'X-Key', value: 'v' } }), at)).toEqual([]);
});

test('credentials put refuses RSA keys under 2048 bits, EC keys on small curves, and a PEM field holding more than one certificate; a stored one is still read', () => {
  const at = Date.parse('2026-06-01T00:00:00Z');
  const valid = (key: string, serial: string) => datedCertificate(`c${serial}`, new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), key, serial).cert;
  const key = rsaKey();
  const weakKey = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const [good, other, weak] = [valid(key, '01'), valid(key, '02'), valid(weakKey, '03')];
  const put = (data: Record<string, unknown>) => credentialPutProblems(parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data }), at);
  expect(put({ certificate: good, privateKey: key, partnerCertificate: good })).toEqual([]);
  expect(put({ certificate: weak, privateKey: weakKey, receiverKeys: [{ certificate: good, privateKey: key }], partnerCertificate: good + other, partnerCertificates: [weak] })).toEqual([
    'data.certificate has a 1024-bit RSA key: at least 2048 bits',
    'data.partnerCertificate holds 2 certificates: give one certificate per field (only the first would be used; a partner\'s chain is not needed, its own certificate is what is pinned)',
    'data.partnerCertificates[0] has a 1024-bit RSA key: at least 2048 bits',
  ]);
  // EC: P-256 (and the other curves peers use) is fine; a smaller curve is refused like a short RSA key.
  const dir = mkdtempSync(path.join(tmpdir(), 'as2-ec-'));
  try {
    const ecCert = (curve: string) => {
      execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', `ec_paramgen_curve:${curve}`, '-nodes', '-subj', '/CN=partner', '-days', '1', '-keyout', path.join(dir, `${curve}.key`), '-out', path.join(dir, `${curve}.pem`)], { stdio: 'ignore' });
      return readFileSync(path.join(dir, `${curve}.pem`), 'utf8');
    };
    expect(put({ certificate: good, privateKey: key, partnerCertificate: ecCert('prime256v1') })).toEqual([]);
    expect(put({ certificate: good, privateKey: key, partnerCertificate: ecCert('secp224r1') })).toEqual([
      'data.partnerCertificate has an EC key on secp224r1: one of prime256v1, secp384r1, secp521r1, brainpoolP256r1, brainpoolP384r1, brainpoolP512r1',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // Put-time only: a credential stored before these checks parses as it did.
  expect(parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { certificate: weak, privateKey: weakKey, partnerCertificate: good + other } }).type).toBe('as2ReceiverAuth');
});

test('credentials put (CLI and API) refuses a new certificate of ours whose key identifier has bytes after it or cannot be read, naming the certificate; a partner\'s is taken; one the stored credential holds is taken again', async () => {
  const odd = await peer.certificate('odd-ski', ['-subj', '/CN=odd-ski', '-addext', 'subjectKeyIdentifier=DER:04:02:AB:CD:00:00']);
  const cut = await peer.certificate('cut-ski', ['-subj', '/CN=cut-ski', '-addext', 'subjectKeyIdentifier=DER:04:05:AB:CD']);
  const good = await peer.party('a');
  const sealer = createCredentialSealer('k'.repeat(43));
  const doc = (data: Record<string, unknown>) => checkCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data }, Date.now());
  const put = (data: Record<string, unknown>, before: Record<string, unknown> | null = null) =>
    as2PutProblems(doc(data), before && sealer.seal(doc(before) as CredentialDocument), sealer);
  expect(put({ certificate: good.cert, privateKey: good.key, partnerCertificate: good.cert })).toEqual([]);
  const trailing = (field: string) => `${field} has 2 bytes after the key identifier in its subjectKeyIdentifier extension (X.690 allows none; readers differ on its key id, by which CMS names a recipient or signer): have the certificate issued again with a well-formed one`;
  const unreadable = 'data.receiverKeys[0].certificate has a subjectKeyIdentifier extension whose value cannot be read (length beyond the data; readers differ on its key id, by which CMS names a recipient or signer): have the certificate issued again with a well-formed one';
  const both = { certificate: odd.cert, privateKey: odd.key, partnerCertificates: [good.cert, odd.cert, cut.cert], receiverKeys: [{ certificate: cut.cert, privateKey: cut.key }] };
  expect(put(both)).toEqual([trailing('data.certificate'), unreadable]);
  // A partner's certificate cannot be issued again by the one who stores it: read as OpenSSL reads it, as a stored one is.
  expect(put({ certificate: good.cert, privateKey: good.key, partnerCertificates: [odd.cert, cut.cert] })).toEqual([]);
  // Ours, already stored (current or retired): a rotation or any other put of the credential is not refused for them.
  expect(put({ ...both, receiverKeys: [{ certificate: cut.cert, privateKey: cut.key }, { certificate: good.cert, privateKey: good.key }] }, both)).toEqual([]);
  const retired = { certificate: good.cert, privateKey: good.key, retiredReceiverKeys: [{ certificate: odd.cert, privateKey: odd.key, retiredAt: new Date().toISOString() }] };
  const stored = sealer.seal({ id: 'cred-as2', type: 'as2ReceiverAuth', data: retired });
  expect(as2PutProblems(doc({ certificate: odd.cert, privateKey: odd.key }), stored, sealer)).toEqual([]);
  // A new one beside them still is refused; so is every one when the stored credential cannot be opened.
  expect(put({ certificate: odd.cert, privateKey: odd.key, receiverKeys: [{ certificate: cut.cert, privateKey: cut.key }] }, { certificate: odd.cert, privateKey: odd.key })).toEqual([unreadable]);
  expect(as2PutProblems(doc({ certificate: odd.cert, privateKey: odd.key }), stored, createCredentialSealer('o'.repeat(43)))).toEqual([trailing('data.certificate')]);
  // Put-time only: a credential stored before this check parses as it did (and opens, certificates.ts).
  expect(parseCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data: { certificate: odd.cert, privateKey: odd.key } }).type).toBe('as2ReceiverAuth');
});

test('a message id names one folder: kept as it is when it is safe, else made safe and followed by a hash of the whole id', () => {
  expect(messageFolder('wf', '<1a2b-3c.4d_5@partner.example>')).toBe('as2/wf/1a2b-3c.4d_5@partner.example');
  expect(messageFolder('wf', ' <same@x> ')).toBe(messageFolder('wf', 'same@x'));
  const ids = ['<po!1@x>', '<po?1@x>', '<po_1@x>', '<po 1@x>', '<.hidden@x>', '<_hidden@x>', `<${'y'.repeat(200)}1@x>`, `<${'y'.repeat(200)}2@x>`, '<pó@x>', '<po@x>'];
  const folders = ids.map((id) => messageFolder('wf', id));
  expect(new Set(folders).size).toBe(ids.length);
  for (const folder of folders) expect(folder).toMatch(/^as2\/wf\/[A-Za-z0-9_@+=-][A-Za-z0-9._@+=-]{0,199}(~[0-9a-f]{32})?$/);
  expect(evidenceFolder('wf', '<po!1@x>', 'req/../1')).toBe(`${messageFolder('wf', '<po!1@x>')}/req_.._1`);
});

test('credentials put refuses a partner certificate whose keyUsage allows no signatures (RFC 5280 §4.2.1.3), listed with the other problems; a stored one is refused at verify instead', async () => {
  const good = await peer.party('ku-receiver');
  const encOnly = await peer.certificate('ku-enc-only', ['-subj', '/CN=ku-enc-only', '-addext', 'keyUsage=critical,keyEncipherment']);
  const signs = await peer.certificate('ku-signs', ['-subj', '/CN=ku-signs', '-addext', 'keyUsage=critical,nonRepudiation']);
  const cut = await peer.certificate('ku-cut', ['-subj', '/CN=ku-cut', '-addext', 'subjectKeyIdentifier=DER:04:05:AB:CD']);
  const sealer = createCredentialSealer('k'.repeat(43));
  const doc = (data: Record<string, unknown>) => checkCredentialDocument({ id: 'cred-as2', type: 'as2ReceiverAuth', data }, Date.now());
  const put = (data: Record<string, unknown>) => as2PutProblems(doc(data), null, sealer);
  expect(put({ certificate: good.cert, privateKey: good.key, partnerCertificate: signs.cert })).toEqual([]);
  expect(put({ certificate: cut.cert, privateKey: cut.key, partnerCertificate: encOnly.cert, partnerCertificates: [signs.cert, encOnly.cert] })).toEqual([
    expect.stringMatching(/^data\.certificate has a subjectKeyIdentifier extension whose value cannot be read/),
    'data.partnerCertificate has a keyUsage extension (keyEncipherment) with neither digitalSignature nor nonRepudiation: its key may not sign (RFC 5280 §4.2.1.3), so no message signed with it would be accepted; pin the partner\'s signing certificate',
    'data.partnerCertificates[1] has a keyUsage extension (keyEncipherment) with neither digitalSignature nor nonRepudiation: its key may not sign (RFC 5280 §4.2.1.3), so no message signed with it would be accepted; pin the partner\'s signing certificate',
  ]);
  // Ours are not judged by it (a receiver certificate decrypts; MDN signing partners judge themselves).
  expect(put({ certificate: encOnly.cert, privateKey: encOnly.key })).toEqual([]);
});
