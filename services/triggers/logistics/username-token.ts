import { createHash } from 'node:crypto';
import type { IngressErrorCode } from '../answers';
import { secretsEqual } from '../secret-compare';
import type { UsernameToken } from './send-stream';

/** A digest token's nonce is at most this many bytes (the profile's are 16). */
const MAX_NONCE_BYTES = 64;

/**
 * The nonce's bytes, when it is base64 spelled the one canonical way. Node's decoder skips characters
 * that are not base64, whitespace and padding, so `abc=`, `abc` and `a!bc=` are the same bytes: a
 * respelled nonce must not pass as a new one (the replay check remembers tokens by these bytes).
 */
export function nonceBytes(nonce: string | null | undefined): Buffer | null {
  if (!nonce || nonce.length > 4 * Math.ceil(MAX_NONCE_BYTES / 3)) return null;
  const bytes = Buffer.from(nonce, 'base64');
  return bytes.length > 0 && bytes.length <= MAX_NONCE_BYTES && bytes.toString('base64') === nonce ? bytes : null;
}

/** What a verified digest token is remembered by: its credential, nonce bytes and Created, hashed. */
export function tokenReplayKey(credentialId: string, token: UsernameToken): string {
  return createHash('sha256').update(credentialId).update('\n').update(nonceBytes(token.nonce) ?? Buffer.alloc(0)).update('\n').update(token.created ?? '').digest('base64');
}

/**
 * WS-Security UsernameToken (OASIS UsernameToken Profile 1.0/1.1) against a user and password:
 * PasswordText compared in constant time; PasswordDigest = base64(SHA-1(nonce ‖ created ‖ password)).
 * A digest token must be fresh (Created within `maxSkewMs` of now); the trigger also refuses one used
 * before within that time (nonce-ledger.ts).
 */
export function checkUsernameToken(token: UsernameToken | null, expected: { user: string; password: string }, now: number, maxSkewMs: number): { ok: true } | { ok: false; code: IngressErrorCode } {
  if (!token) return { ok: false, code: 'authorization-required' };
  const userOk = secretsEqual(token.username, expected.user);
  let passwordOk: boolean;
  if (token.passwordType === 'text') {
    passwordOk = secretsEqual(token.password, expected.password);
  } else {
    const created = token.created ? Date.parse(token.created) : NaN;
    const fresh = Number.isFinite(created) && Math.abs(now - created) <= maxSkewMs;
    const nonce = nonceBytes(token.nonce);
    const digest = createHash('sha1').update(nonce ?? Buffer.alloc(0)).update(token.created ?? '', 'utf8').update(expected.password, 'utf8').digest('base64');
    passwordOk = secretsEqual(token.password, digest) && fresh && nonce !== null;
  }
  return userOk && passwordOk ? { ok: true } : { ok: false, code: 'authorization-wrong' };
}
