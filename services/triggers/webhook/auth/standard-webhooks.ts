import { verify, type KeyObject } from 'node:crypto';
import { DEFAULT_TOLERANCE_SECONDS, standardWebhooksKey, standardWebhooksPublicKey, type StandardWebhooksData } from '../../../platform/registry/signature-credentials';
import type { SignatureAdmission } from './body-signature';
import { anyMatches, createMacSet, decodeSignature, secretKeys } from './mac-set';
import { checkTimestamp } from './timestamp';

/** The v1a (Ed25519) signatures of one request that are tried; more are ignored. */
const MAX_V1A_SIGNATURES = 4;

/**
 * Standard Webhooks (https://www.standardwebhooks.com, spec/standard-webhooks.md): the signed content is
 * `webhook-id.webhook-timestamp.body`; `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256>`
 * (key: the base64 after `whsec_`) and `v1a,<base64 Ed25519>` signatures, of which any one may match, so a
 * sender rotating its secret signs with both. The timestamp must be within the tolerance either way.
 *
 * `v1` is computed while the body streams in (mac-set.ts). `v1a` is Ed25519, which signs the whole message
 * and cannot be fed in pieces, so it is checked afterwards on the whole body (read back from the store when
 * staged, within the held-bytes budget: signed-bodies.ts), and only when no `v1` signature matched.
 */
export const HEADERS = { id: 'webhook-id', timestamp: 'webhook-timestamp', signature: 'webhook-signature' } as const;

/** A credential's keys, made once per (decrypted, cached) credential document rather than per request. */
const prepared = new WeakMap<StandardWebhooksData, { keys: KeyObject[]; publicKeys: KeyObject[] }>();
function keysOf(data: StandardWebhooksData): { keys: KeyObject[]; publicKeys: KeyObject[] } {
  let hit = prepared.get(data);
  if (!hit) {
    hit = {
      keys: secretKeys((data.secrets ?? []).map(standardWebhooksKey).filter((k): k is Buffer => k !== null)),
      publicKeys: (data.publicKeys ?? []).map(standardWebhooksPublicKey).filter((k): k is KeyObject => k !== null),
    };
    prepared.set(data, hit);
  }
  return hit;
}

export function standardWebhooksAdmission(headers: Record<string, string>, data: StandardWebhooksData, nowMs: number): SignatureAdmission {
  const id = headers[HEADERS.id];
  const timestamp = headers[HEADERS.timestamp];
  const header = headers[HEADERS.signature];
  if (id === undefined || timestamp === undefined || header === undefined) return { ok: false, code: 'authorization-required' };
  const when = checkTimestamp(timestamp, nowMs, data.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS);
  if (!when.ok) return when;

  const v1: Buffer[] = [];
  const v1a: Buffer[] = [];
  for (const part of header.split(' ')) {
    const comma = part.indexOf(',');
    if (comma < 0) continue;
    const version = part.slice(0, comma);
    const signature = decodeSignature(part.slice(comma + 1), 'base64');
    if (!signature) continue;
    if (version === 'v1') v1.push(signature);
    // Each v1a signature costs a verification over the whole body: a sender's few (one per key it signs with)
    // are tried, not as many as a 16 KiB header can carry.
    else if (version === 'v1a' && v1a.length < MAX_V1A_SIGNATURES) v1a.push(signature);
  }
  const { keys, publicKeys } = keysOf(data);
  // `credentials put` refuses a credential with no usable key; one stored before fails closed.
  if (keys.length === 0 && publicKeys.length === 0) return { ok: false, code: 'credential-unavailable' };
  const whole = v1a.length > 0 && publicKeys.length > 0;
  if ((v1.length === 0 || keys.length === 0) && !whole) return { ok: false, code: 'authorization-wrong' };

  const before = `${id}.${timestamp}.`;
  // Without a `v1` to check, no HMAC is computed at all.
  const macs = v1.length > 0 && keys.length > 0 ? createMacSet('sha256', keys, before) : null;
  return {
    ok: true,
    secretHeaders: [HEADERS.signature],
    check: {
      update: (chunk) => macs?.update(chunk),
      finish: () => (macs && anyMatches(macs.digests(''), v1) ? 'verified' : whole ? 'needs-whole-body' : 'wrong'),
      whole: whole
        ? {
            prefix: Buffer.from(before, 'utf8'),
            verify(message) {
              for (const key of publicKeys) for (const signature of v1a) if (verify(null, message, key, signature)) return true;
              return false;
            },
          }
        : undefined,
    },
  };
}
