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

test('sealed credentials open with the same key only, and not under another id', () => {
  const sealer = createCredentialSealer('a-long-enough-encryption-key');
  const stored = sealer.seal({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'topsecret' } });
  expect(JSON.stringify(stored)).not.toContain('topsecret');
  expect(sealer.open(stored)).toMatchObject({ id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'topsecret' } });
  expect(() => createCredentialSealer('another-long-encryption-key').open(stored)).toThrow(CredentialCryptoError);
  expect(() => sealer.open({ ...stored, id: 'c2' })).toThrow(/cannot be decrypted/);
});
