import { createPublicKey } from 'node:crypto';
import { as2CredentialProblems, as2KeyProblems, as2LapsedProblems, type As2CredentialData } from './as2-credential';
import { retiredFieldsGiven } from './as2-retired-keys';
import { DOCUMENT_ID } from './registry';
export type { As2CredentialData, As2ReceiverKeyData } from './as2-credential';
import { hmacProblems, jwtProblems, standardWebhooksProblems, type HmacData, type JwtData, type StandardWebhooksData } from './signature-credentials';
import { HEADER_NAME, isObject, SENDABLE_HEADER_VALUE } from './document-checks';

/** The workflow document of DESIGN.md §5, as stored. Trigger parameters are read by the trigger plugins. */
export interface WorkflowNode {
  name: string;
  type: string;
  disabled?: boolean;
  parameters?: Record<string, unknown>;
  /** Credential kind → credential id. */
  credentials?: Record<string, string>;
}

export interface WorkflowDocument {
  id: string;
  name?: string;
  active: boolean;
  nodes: WorkflowNode[];
}

export type CredentialData =
  | { type: 'basicAuth'; data: { user: string; password: string } }
  | { type: 'headerAuth'; data: { name: string; value: string } }
  | { type: 'as2ReceiverAuth'; data: As2CredentialData }
  | { type: 'rsaSignature'; data: { publicKey: string; header?: string } }
  | { type: 'standardWebhooks'; data: StandardWebhooksData }
  | { type: 'hmac'; data: HmacData }
  | { type: 'jwt'; data: JwtData };

export type CredentialType = CredentialData['type'];
export type CredentialDocument = { id: string; name?: string } & CredentialData;

/** A credential at rest: the secret part is sealed (credential-crypto.ts); id and type stay readable. */
export interface StoredCredential {
  id: string;
  name?: string;
  type: CredentialType;
  sealed: { v: 1; iv: string; tag: string; data: string };
  updatedAt: string;
}

export class DocumentError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
    this.name = 'DocumentError';
  }
}


/**
 * What is wrong with a document id (`name` says where it was given), or null. `.` and `..` are named as what they
 * are before the general rule, which refuses them too but would say only "starting with a letter or digit".
 */
export function documentIdProblem(id: unknown, name = '"id"', kind: 'workflow' | 'credential' = 'workflow'): string | null {
  if (id === '.' || id === '..') {
    // A workflow's id is in its hook URL; a credential has none, only its management API path.
    const where = kind === 'workflow' ? `/hook/${id} is refused 400` : `a client resolves /api/v1/credentials/${id} to ${id === '.' ? '/api/v1/credentials/' : '/api/v1/'}`;
    return `${name} ${JSON.stringify(id)} is a dot segment, which a URL path cannot carry (${where}): an id has a letter or digit first`;
  }
  if (typeof id !== 'string' || !DOCUMENT_ID.test(id)) return `${name} must be 1-128 characters of letters, digits, ".", "_" or "-", starting with a letter or digit`;
  return null;
}

/** Check a workflow document from a user (CLI, file); every problem is listed, none is fixed silently. */
export function parseWorkflowDocument(input: unknown): WorkflowDocument {
  const problems: string[] = [];
  if (!isObject(input)) throw new DocumentError(['a workflow document must be a JSON object']);
  const idProblem = documentIdProblem(input.id);
  if (idProblem !== null) problems.push(idProblem);
  if (typeof input.active !== 'boolean') problems.push('"active" must be true or false');
  if (input.name !== undefined && typeof input.name !== 'string') problems.push('"name" must be a string');
  if (!Array.isArray(input.nodes)) problems.push('"nodes" must be an array');
  else {
    const names = new Set<string>();
    input.nodes.forEach((node, i) => {
      const at = `nodes[${i}]`;
      if (!isObject(node)) return problems.push(`${at} must be an object`);
      if (typeof node.name !== 'string' || node.name.trim() === '') problems.push(`${at}.name must be a non-empty string`);
      else if (names.has(node.name)) problems.push(`${at}.name "${node.name}" is used twice`);
      else names.add(node.name);
      if (typeof node.type !== 'string' || node.type === '') problems.push(`${at}.type must be a non-empty string`);
      if (node.disabled !== undefined && typeof node.disabled !== 'boolean') problems.push(`${at}.disabled must be true or false`);
      if (node.parameters !== undefined && !isObject(node.parameters)) problems.push(`${at}.parameters must be an object`);
      if (node.credentials !== undefined) {
        if (!isObject(node.credentials) || !Object.values(node.credentials).every((v) => typeof v === 'string')) problems.push(`${at}.credentials must map credential kinds to credential ids`);
      }
      return undefined;
    });
  }
  if (problems.length) throw new DocumentError(problems);
  return input as unknown as WorkflowDocument;
}

/**
 * What `credentials put` refuses in a well-formed credential at time `at` (CLI and management API alike):
 * certificates that make it useless or unsafe from the start, and fields only the service writes. Kept apart from parseCredentialDocument, which must
 * read a stored credential the same way whenever it is read.
 */
export function credentialPutProblems(doc: CredentialDocument, at: number): string[] {
  if (doc.type !== 'as2ReceiverAuth') return [];
  const data = doc.data as As2CredentialData;
  return [...retiredFieldsGiven(data), ...as2KeyProblems(data), ...as2LapsedProblems(data, at)];
}

/** Check a credential document; the messages never quote a secret. */
export function parseCredentialDocument(input: unknown): CredentialDocument {
  if (!isObject(input)) throw new DocumentError(['a credential document must be a JSON object']);
  const problems: string[] = [];
  const idProblem = documentIdProblem(input.id, '"id"', 'credential');
  if (idProblem !== null) problems.push(idProblem);
  if (input.name !== undefined && typeof input.name !== 'string') problems.push('"name" must be a string');
  const data = input.data;
  if (!isObject(data)) problems.push('"data" must be an object');
  const str = (field: string, optional = false) => {
    const v = isObject(data) ? data[field] : undefined;
    if (v === undefined && optional) return;
    if (typeof v !== 'string' || v === '') problems.push(`data.${field} must be a non-empty string`);
  };
  const pem = (field: string, label: RegExp, optional = false) => {
    const v = isObject(data) ? data[field] : undefined;
    if (v === undefined && optional) return;
    if (typeof v !== 'string' || !label.test(v)) problems.push(`data.${field} must be a PEM block (${label.source.replace(/\\/g, '')})`);
  };
  switch (input.type) {
    case 'basicAuth':
      str('user');
      str('password');
      if (isObject(data) && typeof data.user === 'string' && data.user.includes(':')) problems.push('data.user must not contain ":" (Basic Auth splits at the first colon)');
      break;
    case 'headerAuth':
      str('name');
      str('value');
      if (isObject(data) && typeof data.name === 'string' && !HEADER_NAME.test(data.name)) problems.push('data.name must be a valid HTTP header name');
      // A value no request can carry as it is would refuse every request: the HTTP parser strips the spaces
      // around a header value, and a client sends other characters in an encoding of its own.
      if (isObject(data) && typeof data.value === 'string' && data.value !== '' && !SENDABLE_HEADER_VALUE.test(data.value)) {
        problems.push('data.value must be printable ASCII (spaces and tabs inside it only): a request cannot carry other characters, or spaces around it, as they are');
      }
      break;
    case 'as2ReceiverAuth':
      if (isObject(data)) problems.push(...as2CredentialProblems(data));
      break;
    case 'rsaSignature':
      pem('publicKey', /-----BEGIN PUBLIC KEY-----/);
      str('header', true);
      if (isObject(data) && typeof data.header === 'string' && data.header !== '' && !HEADER_NAME.test(data.header)) problems.push('data.header must be a valid HTTP header name');
      if (isObject(data) && typeof data.publicKey === 'string') {
        // RSA-SHA256 PKCS#1 v1.5 verifies with an RSA key only; any other would refuse every request. A private
        // key beside the public one has no business in the registry.
        if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(data.publicKey)) problems.push('data.publicKey must hold the public key only, not a private key');
        else {
          try {
            const key = createPublicKey(data.publicKey);
            if (key.asymmetricKeyType !== 'rsa') problems.push(`data.publicKey is a ${key.asymmetricKeyType} key; an RSA signature needs an RSA public key (rsaEncryption, not RSA-PSS)`);
          } catch { problems.push('data.publicKey is not a readable SPKI public key'); }
        }
      }
      break;
    case 'standardWebhooks':
      if (isObject(data)) problems.push(...standardWebhooksProblems(data));
      break;
    case 'hmac':
      if (isObject(data)) problems.push(...hmacProblems(data));
      break;
    case 'jwt':
      if (isObject(data)) problems.push(...jwtProblems(data));
      break;
    default:
      problems.push('"type" must be one of basicAuth, headerAuth, as2ReceiverAuth, rsaSignature, standardWebhooks, hmac, jwt');
  }
  if (problems.length) throw new DocumentError(problems);
  return input as unknown as CredentialDocument;
}
