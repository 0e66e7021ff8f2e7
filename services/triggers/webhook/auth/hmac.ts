import { parseSignedContent, resolveHmacSettings, type HmacData, type SignedContent } from '../../../platform/registry/signature-credentials';
import type { HmacSettings } from '../../../platform/registry/hmac-presets';
import type { SignatureAdmission } from './body-signature';
import type { KeyObject } from 'node:crypto';
import { anyMatches, createMacSet, decodeSignature, secretKeys } from './mac-set';
import { checkTimestamp } from './timestamp';
import { trimOws } from '../../ows';

/**
 * A generic HMAC signature (issue #20 item 2): a header, an algorithm, an encoding, a prefix, the signed
 * content as a template of `{timestamp}` and `{body}` (text substitution only, nothing evaluated), an
 * optional timestamp and its window, and several secrets, any of which may match (rotation). A vendor
 * preset (platform/registry/hmac-presets.ts) fills in everything but the secrets. The secrets are the
 * UTF-8 bytes of the configured strings, as GitHub, Stripe, Shopify and Slack all use them.
 */
interface Presented { signatures: string[]; timestamp: string | null }

/** Stripe's `t=1492774577,v1=5257a8…,v1=…,v0=…`: the timestamp under `t`, the signatures under `v1`. */
function keyValue(value: string): Presented {
  const presented: Presented = { signatures: [], timestamp: null };
  for (const pair of value.split(',')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    // Trimmed of spaces and tabs only (ows.ts): `t=<U+00A0>1492774577` is no whole seconds, `<U+00A0>v1` no key.
    const key = trimOws(pair.slice(0, eq));
    if (key === 't') presented.timestamp = trimOws(pair.slice(eq + 1));
    else if (key === 'v1') presented.signatures.push(trimOws(pair.slice(eq + 1)));
  }
  return presented;
}

interface Prepared { settings: HmacSettings; content: SignedContent | string; keys: KeyObject[] }
/** A credential's settings and keys, worked out once per (decrypted, cached) credential document rather than per request. */
const prepared = new WeakMap<HmacData, Prepared>();
function prepare(data: HmacData): Prepared {
  let hit = prepared.get(data);
  if (!hit) {
    const settings = resolveHmacSettings(data);
    const secrets = Array.isArray(data.secrets) ? data.secrets.filter((s) => typeof s === 'string') : [];
    hit = { settings, content: parseSignedContent(settings.signedContent), keys: secretKeys(secrets.map((s) => Buffer.from(s, 'utf8'))) };
    prepared.set(data, hit);
  }
  return hit;
}

export function hmacAdmission(headers: Record<string, string>, data: HmacData, nowMs: number): SignatureAdmission {
  const { settings, content, keys } = prepare(data);
  // `credentials put` refused these; one stored before fails closed.
  if (typeof content === 'string' || keys.length === 0) return { ok: false, code: 'credential-unavailable' };
  const value = headers[settings.header];
  if (value === undefined) return { ok: false, code: 'authorization-required' };
  const secretHeaders = [settings.header];

  let presented: Presented;
  if (settings.format === 'keyValue') presented = keyValue(value);
  else {
    const trimmed = trimOws(value);
    // The prefix names the scheme (`sha256=`, `v0=`): one that is not there is a signature of something else.
    presented = { signatures: trimmed.startsWith(settings.prefix) ? [trimmed.slice(settings.prefix.length)] : [], timestamp: null };
    if (settings.timestampHeader) {
      const t = headers[settings.timestampHeader];
      if (t === undefined) return { ok: false, code: 'authorization-required' };
      presented.timestamp = t;
    }
  }
  const needsTimestamp = content.usesTimestamp || (settings.toleranceSeconds !== null && (settings.format === 'keyValue' || settings.timestampHeader !== null));
  if (needsTimestamp) {
    if (presented.timestamp === null) return { ok: false, code: settings.format === 'keyValue' ? 'authorization-wrong' : 'authorization-required' };
    if (settings.toleranceSeconds !== null) {
      const when = checkTimestamp(presented.timestamp, nowMs, settings.toleranceSeconds);
      if (!when.ok) return when;
    }
  }
  const signatures = presented.signatures.map((s) => decodeSignature(s, settings.encoding)).filter((s): s is Buffer => s !== null);
  if (signatures.length === 0) return { ok: false, code: 'authorization-wrong' };

  const fill = (text: string) => text.replaceAll('{timestamp}', presented.timestamp ?? '');
  const macs = createMacSet(settings.algorithm, keys, fill(content.before));
  const after = fill(content.after);
  return {
    ok: true,
    secretHeaders,
    check: {
      update: (chunk) => macs.update(chunk),
      finish: () => (anyMatches(macs.digests(after), signatures) ? 'verified' : 'wrong'),
    },
  };
}
