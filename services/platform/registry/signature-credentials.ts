import { createPublicKey, createSecretKey, X509Certificate, type KeyObject } from 'node:crypto';
import { HMAC_PRESETS, type HmacAlgorithm, type HmacEncoding, type HmacPresetName, type HmacSettings } from './hmac-presets';
import { HEADER_NAME, isObject } from './document-checks';

/**
 * The credentials of the signature schemes senders use (issue #20): Standard Webhooks, generic HMAC with
 * vendor presets, and JWT bearer tokens. Their shapes, how a stored one resolves into settings, and the
 * checks `credentials put` runs, so a credential that could never verify is refused when it is stored,
 * not at a partner's first request. Messages never quote a secret.
 */
export interface StandardWebhooksData { secrets: string[]; publicKeys?: string[]; toleranceSeconds?: number }
export interface HmacData {
  preset?: HmacPresetName;
  secrets: string[];
  header?: string;
  algorithm?: HmacAlgorithm;
  encoding?: HmacEncoding;
  prefix?: string;
  signedContent?: string;
  format?: HmacSettings['format'];
  timestampHeader?: string;
  toleranceSeconds?: number;
}
export type JwtKey = string | Record<string, unknown>;
export interface JwtData {
  keys: JwtKey[];
  algorithms: string[];
  issuer?: string | string[];
  audience?: string | string[];
  clockSkewSeconds?: number;
  /** Tokens without `exp` live for ever: refused unless this is false. */
  requireExpiration?: boolean;
}

export const DEFAULT_TOLERANCE_SECONDS = 300;
export const DEFAULT_CLOCK_SKEW_SECONDS = 30;
export const HMAC_ALGORITHMS: readonly HmacAlgorithm[] = ['sha1', 'sha256', 'sha512'];
export const HMAC_ENCODINGS: readonly HmacEncoding[] = ['hex', 'base64'];
/** `none` is never among them: an unsigned token is no credential. */
export const JWT_ALGORITHMS = ['HS256', 'HS384', 'HS512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'] as const;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The key bytes of a Standard Webhooks secret: base64 after `whsec_` (the prefix is optional, as in the official libraries). */
export function standardWebhooksKey(secret: string): Buffer | null {
  const b64 = secret.startsWith('whsec_') ? secret.slice(6) : secret;
  if (b64 === '' || !BASE64.test(b64)) return null;
  return Buffer.from(b64, 'base64');
}

/** An Ed25519 public key from `whpk_` + base64 of its 32 raw bytes. */
export function standardWebhooksPublicKey(text: string): KeyObject | null {
  const b64 = text.startsWith('whpk_') ? text.slice(5) : text;
  if (!BASE64.test(b64)) return null;
  const raw = Buffer.from(b64, 'base64');
  if (raw.length !== 32) return null;
  try { return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' }); } catch { return null; }
}

/** The signed content around the body: `{body}` exactly once, `{timestamp}` anywhere, any other text literal. */
export interface SignedContent { before: string; after: string; usesTimestamp: boolean }

export function parseSignedContent(template: string): SignedContent | string {
  const tokens: string[] = template.match(/\{[^}]*\}/g) ?? [];
  const unknown = tokens.find((t) => t !== '{body}' && t !== '{timestamp}');
  if (unknown) return `may name only {body} and {timestamp}, not ${unknown}`;
  if (tokens.filter((t) => t === '{body}').length !== 1) return 'must contain {body} exactly once';
  const at = template.indexOf('{body}');
  return { before: template.slice(0, at), after: template.slice(at + 6), usesTimestamp: tokens.includes('{timestamp}') };
}

/** A credential's settings: its preset's, with whatever fields it sets itself on top. */
export function resolveHmacSettings(data: HmacData): HmacSettings {
  const base: HmacSettings = data.preset ? HMAC_PRESETS[data.preset] : { header: '', algorithm: 'sha256', encoding: 'hex', prefix: '', signedContent: '{body}', format: 'single', timestampHeader: null, toleranceSeconds: null };
  const timestampHeader = data.timestampHeader !== undefined ? data.timestampHeader.toLowerCase() : base.timestampHeader;
  const signedContent = data.signedContent ?? base.signedContent;
  return {
    header: (data.header ?? base.header).toLowerCase(),
    algorithm: data.algorithm ?? base.algorithm,
    encoding: data.encoding ?? base.encoding,
    prefix: data.prefix ?? base.prefix,
    signedContent,
    format: data.format ?? base.format,
    timestampHeader,
    // A signed timestamp with no stated window gets the default one, wherever it comes from (a header, or `t=`
    // of keyValue): a timestamp nobody checks protects nothing, and one nobody holds to digits lets the signed
    // text's boundary between timestamp and body move (`t=T.amount=1` with body `5`).
    toleranceSeconds: data.toleranceSeconds ?? base.toleranceSeconds ?? (timestampHeader || signedContent.includes('{timestamp}') ? DEFAULT_TOLERANCE_SECONDS : null),
  };
}

function secretListProblems(data: Record<string, unknown>, field: string, optional: boolean, each: (v: string) => string | null): string[] {
  const v = data[field];
  if (v === undefined && optional) return [];
  if (!Array.isArray(v) || (!optional && v.length === 0) || !v.every((s) => typeof s === 'string' && s !== '')) return [`data.${field} must be a${optional ? 'n' : ' non-empty'} array of non-empty strings`];
  const problems: string[] = [];
  v.forEach((s: string, i) => { const p = each(s); if (p) problems.push(`data.${field}[${i}] ${p}`); });
  return problems;
}

function toleranceProblems(data: Record<string, unknown>, field: string): string[] {
  const v = data[field];
  if (v === undefined) return [];
  return typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= 7 * 24 * 3600 ? [] : [`data.${field} must be a whole number of seconds between 1 and 604800`];
}

export function standardWebhooksProblems(data: Record<string, unknown>): string[] {
  const problems = [
    ...secretListProblems(data, 'secrets', Array.isArray(data.publicKeys) && data.publicKeys.length > 0, (s) => (standardWebhooksKey(s) ? null : 'is not whsec_ followed by base64')),
    ...secretListProblems(data, 'publicKeys', true, (s) => (standardWebhooksPublicKey(s) ? null : 'is not whpk_ followed by the base64 of a 32-byte Ed25519 public key')),
    ...toleranceProblems(data, 'toleranceSeconds'),
  ];
  return problems;
}

/**
 * Every problem at once: each field is checked whatever the others hold. Only a check that needs another field
 * valid (which template a preset brings, where its timestamp comes from) is left out while that field is not.
 */
export function hmacProblems(data: Record<string, unknown>): string[] {
  const problems = secretListProblems(data, 'secrets', false, () => null);
  const presetKnown = data.preset === undefined || (typeof data.preset === 'string' && Object.hasOwn(HMAC_PRESETS, data.preset));
  if (!presetKnown) problems.push(`data.preset must be one of ${Object.keys(HMAC_PRESETS).join(', ')}`);
  const headerField = (field: string): boolean => {
    const v = data[field];
    if (v === undefined || (typeof v === 'string' && HEADER_NAME.test(v))) return true;
    problems.push(`data.${field} must be a valid HTTP header name`);
    return false;
  };
  const headerValid = headerField('header');
  const timestampHeaderValid = headerField('timestampHeader');
  const preset = presetKnown && data.preset !== undefined ? HMAC_PRESETS[data.preset as HmacPresetName] : null;
  // An unknown preset is named already; whether it would have brought the header is not known.
  if (data.preset === undefined && data.header === undefined) problems.push('data.header must name the signature header (or data.preset a vendor)');
  if (data.algorithm !== undefined && !HMAC_ALGORITHMS.includes(data.algorithm as HmacAlgorithm)) problems.push(`data.algorithm must be one of ${HMAC_ALGORITHMS.join(', ')}`);
  if (data.encoding !== undefined && !HMAC_ENCODINGS.includes(data.encoding as HmacEncoding)) problems.push(`data.encoding must be one of ${HMAC_ENCODINGS.join(', ')}`);
  const formatValid = data.format === undefined || data.format === 'single' || data.format === 'keyValue';
  if (!formatValid) problems.push('data.format must be single or keyValue');
  if (data.prefix !== undefined && typeof data.prefix !== 'string') problems.push('data.prefix must be a string');
  // The prefix stands in a header value before the signature: a character no value carries makes it unmatchable.
  else if (typeof data.prefix === 'string' && !/^[\x20-\x7e]*$/.test(data.prefix)) problems.push('data.prefix must be printable ASCII: a header value cannot carry other characters as they are');
  // The headers in effect, the preset's where the credential names none (a credential that names the preset's
  // signature header as its timestamp header would be stored, then refuse every request).
  // Only in `single` format: keyValue reads its timestamp from the signature header's `t=` (Stripe's), never from
  // a timestampHeader, so there one header does carry both (found by review).
  const formatInEffect = formatValid ? ((data.format as HmacSettings['format'] | undefined) ?? preset?.format ?? 'single') : null;
  if (formatInEffect === 'keyValue' && data.timestampHeader !== undefined && data.timestampHeader !== null) {
    problems.push('data.timestampHeader is never read in keyValue format, whose timestamp is t= in the signature header: leave it out');
  }
  if (presetKnown && headerValid && timestampHeaderValid && formatInEffect === 'single') {
    const header = (data.header as string | undefined) ?? preset?.header;
    const timestampHeader = (data.timestampHeader as string | undefined) ?? preset?.timestampHeader;
    if (header && timestampHeader && header.toLowerCase() === timestampHeader.toLowerCase()) {
      const named = data.timestampHeader !== undefined ? 'data.timestampHeader' : `the preset's timestamp header (${timestampHeader})`;
      problems.push(`${named} must be another header than ${data.header !== undefined ? 'data.header' : `the preset's signature header (${header})`}: one header cannot carry both`);
    }
  }
  const tolerance = toleranceProblems(data, 'toleranceSeconds');
  problems.push(...tolerance);
  if (data.signedContent !== undefined && typeof data.signedContent !== 'string') problems.push('data.signedContent must be a string');
  // The template: the credential's own, else its preset's (or the bare body); unknown under an unknown preset.
  const template = typeof data.signedContent === 'string' ? data.signedContent : data.signedContent === undefined && presetKnown ? (preset?.signedContent ?? '{body}') : null;
  if (template === null) return problems;
  const content = parseSignedContent(template);
  if (typeof content === 'string') return [...problems, `data.signedContent ${content}`];
  // Where the timestamp comes from is known only when the preset, format and timestamp header are.
  if (!presetKnown || !formatValid || !timestampHeaderValid) return problems;
  const format = (data.format as HmacSettings['format'] | undefined) ?? preset?.format ?? 'single';
  const timestampHeader = data.timestampHeader !== undefined ? data.timestampHeader : (preset?.timestampHeader ?? null);
  const hasTimestamp = format === 'keyValue' || timestampHeader !== null;
  if (content.usesTimestamp && !hasTimestamp) problems.push('data.signedContent names {timestamp} but no data.timestampHeader says where it comes from');
  // A window over a timestamp the signature does not cover stops no replay: the sender of a copy writes a fresh one.
  // A bad toleranceSeconds is named above; it does not also ask for a {timestamp} it may not have meant.
  if (!content.usesTimestamp && (hasTimestamp || (data.toleranceSeconds !== undefined && tolerance.length === 0))) {
    problems.push('data.signedContent must name {timestamp} when a timestamp is checked (data.timestampHeader, data.format keyValue or data.toleranceSeconds): a timestamp outside the signature stops no replay');
  }
  return problems;
}

/** A configured JWT key as Node holds it: HMAC secrets as secret keys, PEM and JWK public keys as public ones. */
export function jwtKeyObject(key: JwtKey): KeyObject {
  if (typeof key === 'string') {
    if (/-----BEGIN CERTIFICATE-----/.test(key)) return new X509Certificate(key).publicKey;
    // A private key's PEM yields its public half: the ingress never needs to sign.
    if (/-----BEGIN /.test(key)) return createPublicKey(key);
    // Any other text is an HS* secret, as its UTF-8 bytes. A PEM never becomes a secret (algorithm confusion).
    return createSecretKey(Buffer.from(key, 'utf8'));
  }
  if (key.kty === 'oct') {
    if (typeof key.k !== 'string' || key.k === '') throw new Error('an oct JWK needs k');
    return createSecretKey(Buffer.from(key.k, 'base64url'));
  }
  return createPublicKey({ key: key as never, format: 'jwk' });
}

/** jose verifies RS* and PS* only with RSA keys of this many bits or more (it throws on smaller ones). */
const JWT_MIN_RSA_BITS = 2048;

/**
 * The kinds of key each algorithm family verifies with; anything else is refused (no algorithm confusion), and
 * so is what jose would refuse to verify with: RSA keys under 2048 bits, and RSA-PSS (id-RSASSA-PSS) keys,
 * which it does not take (PS* tokens verify with plain RSA keys).
 */
export function jwtKeyFits(alg: string, key: KeyObject): boolean {
  if (alg.startsWith('HS')) return key.type === 'secret' && key.symmetricKeySize! >= Number(alg.slice(2)) / 8;
  if (key.type !== 'public') return false;
  if (alg.startsWith('RS') || alg.startsWith('PS')) return key.asymmetricKeyType === 'rsa' && (key.asymmetricKeyDetails?.modulusLength ?? 0) >= JWT_MIN_RSA_BITS;
  const curve = { ES256: 'prime256v1', ES384: 'secp384r1', ES512: 'secp521r1' }[alg];
  return key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === curve;
}

/** The keys of a credential: each entry a PEM, a JWK, or a JWKS document (`{"keys":[…]}`). */
export function jwtKeyEntries(keys: JwtKey[]): JwtKey[] {
  return keys.flatMap((k) => (isObject(k) && Array.isArray(k.keys) ? (k.keys as JwtKey[]) : [k]));
}

export function jwtProblems(data: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const algorithms = Array.isArray(data.algorithms) ? data.algorithms : null;
  if (!algorithms || algorithms.length === 0) problems.push(`data.algorithms must be a non-empty array of ${JWT_ALGORITHMS.join(', ')}`);
  else algorithms.forEach((a, i) => { if (!JWT_ALGORITHMS.includes(a)) problems.push(`data.algorithms[${i}] must be one of ${JWT_ALGORITHMS.join(', ')} (never none)`); });
  /** Each key, with the one algorithm a JWK's `alg` restricts it to (the verifier tries it for no other). */
  const keys: { key: KeyObject; alg: string | null }[] = [];
  const beforeKeys = problems.length;
  if (!Array.isArray(data.keys) || data.keys.length === 0) problems.push('data.keys must be a non-empty array of PEM blocks, JWKs, JWKS documents or HS* secrets');
  else {
    // A JWKS entry's keys are named inside it (data.keys[0].keys[2]), not by their place once flattened.
    (data.keys as JwtKey[]).forEach((entry, i) => jwtKeyEntries([entry]).forEach((k, j) => {
      const at = isObject(entry) && Array.isArray(entry.keys) ? `data.keys[${i}].keys[${j}]` : `data.keys[${i}]`;
      if (!(typeof k === 'string' && k !== '') && !isObject(k)) return void problems.push(`${at} must be a PEM block, a JWK or a secret`);
      const alg = isObject(k) && k.alg !== undefined ? k.alg : null;
      if (alg !== null && !(typeof alg === 'string' && (JWT_ALGORITHMS as readonly string[]).includes(alg))) return void problems.push(`${at}.alg must be one of ${JWT_ALGORITHMS.join(', ')} (never none), or left out`);
      try { keys.push({ key: jwtKeyObject(k), alg }); } catch { problems.push(`${at} is not a readable ${typeof k === 'string' ? 'PEM public key or certificate' : 'JWK'}`); }
    }));
  }
  // Which algorithm a key fits is known only once every key reads: the one that would fit may be the broken one.
  const keysRead = problems.length === beforeKeys;
  for (const field of ['issuer', 'audience']) {
    const v = data[field];
    if (v !== undefined && !(typeof v === 'string' && v !== '') && !(Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === 'string' && s !== ''))) problems.push(`data.${field} must be a non-empty string or array of strings`);
  }
  const skew = data.clockSkewSeconds;
  if (skew !== undefined && !(typeof skew === 'number' && Number.isInteger(skew) && skew >= 0 && skew <= 3600)) problems.push('data.clockSkewSeconds must be a whole number of seconds between 0 and 3600');
  if (data.requireExpiration !== undefined && typeof data.requireExpiration !== 'boolean') problems.push('data.requireExpiration must be true or false');
  if (!keysRead) return problems;
  for (const alg of (algorithms ?? []) as string[]) {
    if (!(JWT_ALGORITHMS as readonly string[]).includes(alg)) continue;
    if (!keys.some((k) => (k.alg === null || k.alg === alg) && jwtKeyFits(alg, k.key))) problems.push(`data.algorithms lists ${alg} but no key in data.keys fits it (${alg.startsWith('HS') ? `a secret or oct JWK of at least ${Number(alg.slice(2)) / 8} bytes` : alg.startsWith('ES') ? 'an EC public key on its curve' : `an RSA public key of ${JWT_MIN_RSA_BITS} bits or more`}, with no JWK alg other than ${alg})`);
  }
  return problems;
}
