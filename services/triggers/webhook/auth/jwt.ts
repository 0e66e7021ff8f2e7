import type { KeyObject } from 'node:crypto';
import { decodeProtectedHeader, errors, jwtVerify } from 'jose';
import type { IngressErrorCode } from '../../answers';
import { DEFAULT_CLOCK_SKEW_SECONDS, jwtKeyEntries, jwtKeyFits, jwtKeyObject, type JwtData, type JwtKey } from '../../../platform/registry/signature-credentials';

/**
 * A JWT bearer token (`Authorization: Bearer <jwt>`), verified by `jose` against the credential's static
 * keys, on headers alone, so a caller without a valid token never has its body read.
 *
 * Algorithm confusion is closed twice: `jose` is told the credential's algorithms (never `none`), and for
 * each algorithm only keys of its kind are tried (jwtKeyFits: HS* secret keys, RS/PS RSA public keys,
 * ES* EC keys on the curve), so an HS256 token "signed" with an RSA public key's PEM finds no key at all.
 * A key whose JWK names a `kid` is not tried for a token naming another `kid`; a token naming none is tried
 * against every key of its kind, as `jose` searches a JWKS (the signature decides).
 */
export type JwtOutcome = { ok: true; principal: string } | { ok: false; code: IngressErrorCode };

interface PreparedKey { key: KeyObject; kid: string | null; alg: string | null }
const prepared = new WeakMap<JwtData, PreparedKey[]>();

function keysOf(data: JwtData): PreparedKey[] {
  let keys = prepared.get(data);
  if (!keys) {
    keys = jwtKeyEntries(data.keys).flatMap((entry: JwtKey) => {
      try {
        const jwk = typeof entry === 'string' ? null : entry;
        return [{ key: jwtKeyObject(entry), kid: typeof jwk?.kid === 'string' ? jwk.kid : null, alg: typeof jwk?.alg === 'string' ? jwk.alg : null }];
      } catch {
        return []; // refused by `credentials put`; one stored before is simply not a key
      }
    });
    prepared.set(data, keys);
  }
  return keys;
}

export async function verifyBearer(authorization: string | undefined, data: JwtData, nowMs: number): Promise<JwtOutcome> {
  // Spaces and tabs around the token, as HTTP delimits it (ows.ts); `\s` also took U+00A0 and other Unicode spaces.
  const match = authorization ? /^Bearer[ \t]+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*)[ \t]*$/i.exec(authorization) : null;
  // No bearer token at all (no header, or another scheme, `Bearer<U+00A0>` included): authorization is required.
  if (!authorization || !/^Bearer[ \t]/i.test(authorization)) return { ok: false, code: 'authorization-required' };
  if (!match) return { ok: false, code: 'authorization-wrong' };
  const token = match[1];
  let header;
  try { header = decodeProtectedHeader(token); } catch { return { ok: false, code: 'authorization-wrong' }; }
  const alg = header.alg;
  if (typeof alg !== 'string' || !data.algorithms.includes(alg)) return { ok: false, code: 'authorization-wrong' };
  const candidates = keysOf(data).filter((k) => jwtKeyFits(alg, k.key) && (k.alg === null || k.alg === alg) && (k.kid === null || header.kid === undefined || k.kid === header.kid));
  for (const { key } of candidates) {
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: [alg],
        issuer: data.issuer,
        audience: data.audience,
        clockTolerance: data.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_SECONDS,
        currentDate: new Date(nowMs),
        requiredClaims: data.requireExpiration === false ? [] : ['exp'],
      });
      return { ok: true, principal: typeof payload.sub === 'string' && payload.sub !== '' ? `jwt:${payload.sub}` : 'jwt' };
    } catch (error) {
      // The signature held (jose checks it first) but a time claim did not: no other key changes that.
      if (error instanceof errors.JWTExpired) return { ok: false, code: 'token-expired' };
      if (error instanceof errors.JWTClaimValidationFailed) return { ok: false, code: error.claim === 'nbf' ? 'token-expired' : 'authorization-wrong' };
      // A signature that does not verify with this key: try the next (rotation).
    }
  }
  return { ok: false, code: 'authorization-wrong' };
}
