import { createHash } from 'node:crypto';
import type { IngressErrorCode } from '../answers';
import { secretsEqual } from '../secret-compare';
import type { UsernameToken } from './send-stream';

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
    const digest = createHash('sha1').update(Buffer.from(token.nonce ?? '', 'base64')).update(token.created ?? '', 'utf8').update(expected.password, 'utf8').digest('base64');
    passwordOk = secretsEqual(token.password, digest) && fresh;
  }
  return userOk && passwordOk ? { ok: true } : { ok: false, code: 'authorization-wrong' };
}
