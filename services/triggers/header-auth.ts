import type { WorkflowNode } from '../platform/registry/documents';
import type { IngressErrorCode } from './answers';
import { firstSighting } from './first-sighting';
import { secretsEqual } from './secret-compare';
import type { InboundRequest, TriggerServices } from './trigger';

/**
 * Basic and Header Auth on a request's headers (SPEC §5), for every trigger kind that offers them:
 * missing → `authorization-required`, wrong → `authorization-wrong`, a referenced credential that is
 * missing, of another type or unreadable → `credential-unavailable` (fail closed, with a log line).
 * Each trigger renders the code in its own answer format (JSON error, SOAP Fault).
 */
export type HeaderAuthOutcome =
  | { ok: true; principal: string | null; secretHeaders: string[] }
  | { ok: false; code: IngressErrorCode };

export type CredentialCheck = 'none' | 'basicAuth' | 'headerAuth';

const misconfiguredFirstSeen = firstSighting();
/** By credential alone: a registry that fails, or a key that cannot decrypt it, fails it for every workflow naming it. */
const unreadableFirstSeen = firstSighting();

/**
 * The credential a node names under `key` (by default the credential type), decrypted and of `type`;
 * null (logged) when it cannot be used.
 */
export async function nodeCredential(node: WorkflowNode, type: string, workflowId: string, services: TriggerServices, key = type) {
  const credentialId = node.credentials?.[key];
  const credential = credentialId ? await services.credential(credentialId).then((read) => {
    unreadableFirstSeen.forget(credentialId);
    return read;
  }, (error: Error) => {
    // At error once (then at debug) until it reads again, as below: a flood while it cannot would log a line a request.
    const first = unreadableFirstSeen(credentialId);
    services.logger[first ? 'error' : 'debug']('credential cannot be read', { credentialId, node: node.name, workflowId, error, ...(first ? {} : { repeated: true }) });
    return undefined;
  }) : null;
  if (!credential || credential.type !== type) {
    if (credential !== undefined) {
      // At error once (then at debug) until it works again: every request to the workflow meets it meanwhile.
      const first = misconfiguredFirstSeen(workflowId, node.name, credentialId ?? '', type);
      services.logger[first ? 'error' : 'debug']('trigger credential is missing or of the wrong type', { credentialId: credentialId ?? null, node: node.name, workflowId, expected: type, ...(first ? {} : { repeated: true }) });
    }
    return null;
  }
  misconfiguredFirstSeen.forget(workflowId, node.name, credentialId ?? '', type);
  return credential;
}

/** `invalid`: the node names an option this build does not know, which fails closed (logged). */
export async function checkHeaderAuth(request: InboundRequest, node: WorkflowNode, type: CredentialCheck | 'invalid', services: TriggerServices): Promise<HeaderAuthOutcome> {
  if (type === 'none') return { ok: true, principal: null, secretHeaders: [] };
  if (type === 'invalid') {
    services.logger.error('trigger node names an unknown authentication option; refusing', { node: node.name, workflowId: request.workflowId });
    return { ok: false, code: 'credential-unavailable' };
  }
  const credential = await nodeCredential(node, type, request.workflowId, services);
  if (!credential) return { ok: false, code: 'credential-unavailable' };

  if (credential.type === 'basicAuth') {
    const header = request.headers.authorization;
    if (!header) return { ok: false, code: 'authorization-required' };
    const token = basicToken(header);
    // Another form is a wrong credential, answered as one: its form is the caller's, so it tells nothing of the secret.
    if (token === null) return { ok: false, code: 'authorization-wrong' };
    const decoded = basicCredentials(Buffer.from(token, 'base64'));
    const colon = decoded.indexOf(':');
    const user = colon >= 0 ? decoded.slice(0, colon) : decoded;
    const password = colon >= 0 ? decoded.slice(colon + 1) : '';
    // Both compared, always, so the time does not tell which one was wrong.
    const userOk = secretsEqual(user, credential.data.user);
    const passwordOk = secretsEqual(password, credential.data.password);
    return userOk && passwordOk && colon >= 0
      ? { ok: true, principal: `basic:${credential.data.user}`, secretHeaders: ['authorization'] }
      : { ok: false, code: 'authorization-wrong' };
  }
  if (credential.type === 'headerAuth') {
    const name = credential.data.name.toLowerCase();
    const value = request.headers[name];
    if (value === undefined) return { ok: false, code: 'authorization-required' };
    return secretsEqual(value, credential.data.value)
      ? { ok: true, principal: `header:${credential.data.name}`, secretHeaders: [name] }
      : { ok: false, code: 'authorization-wrong' };
  }
  return { ok: false, code: 'credential-unavailable' };
}

/**
 * The token of `Basic <base64>` (RFC 7617): the scheme in any case, then spaces or tabs (HTTP's white space; `\s`
 * also took U+00A0 and other Unicode spaces), and base64 as RFC 4648 §4 writes it, padding included, in the one
 * form that decodes and encodes back to itself. Node's decoder alone skips foreign characters, reads the URL-safe
 * alphabet, stops at the first padding and ignores what follows, so many texts would be one credential. Null for
 * any other form.
 */
function basicToken(header: string): string | null {
  const match = /^Basic[ \t]+([A-Za-z0-9+/]*={0,2})[ \t]*$/i.exec(header);
  if (!match) return null;
  return Buffer.from(match[1], 'base64').toString('base64') === match[1] ? match[1] : null;
}

// ignoreBOM: a leading U+FEFF is part of the user name, not dropped (`\uFEFFuser` and `user` would be one text).
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * `user:password` as text: UTF-8 (RFC 7617's `charset="UTF-8"`), and bytes that are not UTF-8 as ISO-8859-1, which
 * is what Python's requests and other older clients send for a non-ASCII password (RFC 7617 leaves the default
 * charset open). Each byte is one character in ISO-8859-1, so no two byte strings become one text, as they would
 * with U+FFFD; and a text read so could also be sent as UTF-8, so the fallback lets no other credential in.
 */
function basicCredentials(bytes: Buffer): string {
  try { return strictUtf8.decode(bytes); } catch { return bytes.toString('latin1'); }
}

/** Triggers whose bodies are compressed inside (SOAP Messages) or always small take no Content-Encoding. */
export function hasContentEncoding(request: InboundRequest): boolean {
  const encoding = request.headers['content-encoding'];
  return encoding !== undefined && encoding.trim().toLowerCase() !== 'identity';
}
