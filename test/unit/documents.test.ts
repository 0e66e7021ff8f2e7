import { generateKeyPairSync } from 'node:crypto';
import { DocumentError, parseCredentialDocument, parseWorkflowDocument } from '../../services/platform/registry/documents';
import { CredentialCryptoError, createCredentialSealer } from '../../services/platform/registry/credential-crypto';

const problemsOf = (fn: () => unknown) => { try { fn(); } catch (e) { if (e instanceof DocumentError) return e.problems; throw e; } return []; };

test('a valid workflow document passes as it is', () => {
  const doc = { id: 'wf-orders', active: true, nodes: [{ name: 'Orders hook', type: 'webhook', parameters: { authentication: 'headerAuth' }, credentials: { headerAuth: 'cred-1' } }] };
  expect(parseWorkflowDocument(doc)).toBe(doc);
});

test('workflow problems are all listed', () => {
  const found = problemsOf(() => parseWorkflowDocument({ id: '../etc', active: 'yes', nodes: [{ name: 'A', type: 'webhook' }, { name: 'A', type: '' }, 'x'] }));
  expect(found).toEqual([
    expect.stringMatching(/^"id" must be/),
    '"active" must be true or false',
    'nodes[1].name "A" is used twice',
    'nodes[1].type must be a non-empty string',
    'nodes[2] must be an object',
  ]);
});

test('an id "." or ".." is refused as a dot segment, not only as an id that starts with no letter or digit', () => {
  const nodes = [{ name: 'Hook', type: 'webhook' }];
  for (const id of ['.', '..']) {
    const dot = `"id" ${JSON.stringify(id)} is a dot segment, which a URL path cannot carry (/hook/${id} is refused 400): an id has a letter or digit first`;
    expect(problemsOf(() => parseWorkflowDocument({ id, active: true, nodes }))).toEqual([dot]);
    // A credential has no hook URL: its dot segment is told by its management API path.
    const resolved = id === '.' ? '/api/v1/credentials/' : '/api/v1/';
    expect(problemsOf(() => parseCredentialDocument({ id, type: 'headerAuth', data: { name: 'X-Key', value: 'v' } })))
      .toEqual([`"id" ${JSON.stringify(id)} is a dot segment, which a URL path cannot carry (a client resolves /api/v1/credentials/${id} to ${resolved}): an id has a letter or digit first`]);
  }
  expect(problemsOf(() => parseWorkflowDocument({ id: '...', active: true, nodes }))).toEqual(['"id" must be 1-128 characters of letters, digits, ".", "_" or "-", starting with a letter or digit']);
});

test('credential documents are checked per type without quoting secrets', () => {
  expect(parseCredentialDocument({ id: 'c1', type: 'basicAuth', data: { user: 'u', password: 'p' } }).type).toBe('basicAuth');
  expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'headerAuth', data: { name: 'Bad Header', value: 'topsecret' } })))
    .toEqual(['data.name must be a valid HTTP header name']);
  expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'rsaSignature', data: { publicKey: '-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----' } })))
    .toEqual(['data.publicKey is not a readable SPKI public key']);
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  expect(parseCredentialDocument({ id: 'c2', type: 'rsaSignature', data: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }) } }).type).toBe('rsaSignature');
  expect(problemsOf(() => parseCredentialDocument({ id: 'c3', type: 'rsaSignature', data: { publicKey: publicKey.export({ type: 'spki', format: 'pem' }), header: 'X Sig' } })))
    .toEqual(['data.header must be a valid HTTP header name']);
  expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'oauth', data: {} }))).toEqual([expect.stringMatching(/^"type" must be one of/)]);
});

test('credentials no request could ever match are refused when stored, not at every request', () => {
  // headerAuth: the HTTP parser strips spaces around a value; other characters arrive in the client's encoding.
  for (const value of ['  padded  ', 'café', 'snow☃', 'abc\r\nX-Other: 1', 'nul\u0000', '\ttab']) {
    expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value } })))
      .toEqual([expect.stringMatching(/^data\.value must be printable ASCII/)]);
  }
  expect(parseCredentialDocument({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'Token a b\tc!~' } }).type).toBe('headerAuth');
  // rsaSignature: RSA-SHA256 PKCS#1 v1.5 verifies with an RSA public key and nothing else.
  const spki = (type: 'ec' | 'ed25519' | 'rsa-pss') => (type === 'ec' ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' }) : type === 'rsa-pss' ? generateKeyPairSync('rsa-pss', { modulusLength: 2048 }) : generateKeyPairSync('ed25519'))
    .publicKey.export({ type: 'spki', format: 'pem' }) as string;
  for (const type of ['ec', 'ed25519', 'rsa-pss'] as const) {
    expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'rsaSignature', data: { publicKey: spki(type) } })))
      .toEqual([`data.publicKey is a ${type} key; an RSA signature needs an RSA public key (rsaEncryption, not RSA-PSS)`]);
  }
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateThenPublic = `${rsa.privateKey.export({ type: 'pkcs8', format: 'pem' })}${rsa.publicKey.export({ type: 'spki', format: 'pem' })}`;
  const problems = problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'rsaSignature', data: { publicKey: privateThenPublic } }));
  expect(problems).toEqual(['data.publicKey must hold the public key only, not a private key']);
  expect(problems.join()).not.toContain('MII');
  // hmac: a prefix no header value carries, and one header asked to carry both the signature and the timestamp.
  expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'hmac', data: { secrets: ['s3cret'], header: 'X-Sig', prefix: 'v1=\r\n' } })))
    .toEqual([expect.stringMatching(/^data\.prefix must be printable ASCII/)]);
  expect(problemsOf(() => parseCredentialDocument({ id: 'c1', type: 'hmac', data: { secrets: ['s3cret'], header: 'X-Sig', timestampHeader: 'x-sig', signedContent: '{timestamp}.{body}' } })))
    .toEqual(['data.timestampHeader must be another header than data.header: one header cannot carry both']);
});

test('sealed credentials open with the same key only, and not under another id', () => {
  const sealer = createCredentialSealer('a-long-enough-encryption-key');
  const stored = sealer.seal({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'topsecret' } });
  expect(JSON.stringify(stored)).not.toContain('topsecret');
  expect(sealer.open(stored)).toMatchObject({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'topsecret' } });
  expect(() => createCredentialSealer('another-long-encryption-key').open(stored)).toThrow(CredentialCryptoError);
  expect(() => sealer.open({ ...stored, id: 'c2' })).toThrow(/cannot be decrypted/);
});

test('after a key rotation, the previous key opens what it sealed; sealing always uses the key', () => {
  const old = createCredentialSealer('the-old-encryption-key');
  const rotating = createCredentialSealer('the-new-encryption-key', 'the-old-encryption-key');
  const underOld = old.seal({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'topsecret' } });
  expect(rotating.open(underOld).data).toEqual({ name: 'X-Key', value: 'topsecret' });
  expect(rotating.sealedWithPrevious(underOld)).toBe(true);
  const resealed = rotating.seal(rotating.open(underOld));
  expect(rotating.sealedWithPrevious(resealed)).toBe(false);
  expect(createCredentialSealer('the-new-encryption-key').open(resealed).data).toEqual({ name: 'X-Key', value: 'topsecret' });
  expect(() => old.open(resealed)).toThrow(CredentialCryptoError);
  // Neither key: the error names both variables, and never a key.
  const elsewhere = createCredentialSealer('a-third-encryption-key').seal({ id: 'c3', type: 'headerAuth', data: { name: 'X-Key', value: 'x' } });
  for (const call of [() => rotating.open(elsewhere), () => rotating.sealedWithPrevious(elsewhere)]) {
    expect(call).toThrow('credential c3 cannot be decrypted with INGRESS_ENCRYPTION_KEY or INGRESS_ENCRYPTION_KEY_PREVIOUS (wrong key or damaged document)');
  }
});
