import { As2Fault } from './faults';

/**
 * Algorithms as data (DESIGN.md §8: "protocol versions as data, not branches"): object identifiers and
 * partner spellings → what Node's crypto calls them.
 */
export type Digest = 'sha1' | 'sha224' | 'sha256' | 'sha384' | 'sha512' | 'md5';

export const DIGEST_OIDS: Record<string, Digest> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.4': 'sha224',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
  '1.2.840.113549.2.5': 'md5',
  // Signature OIDs some senders put where a digest belongs.
  '1.2.840.113549.1.1.5': 'sha1',
  '1.2.840.113549.1.1.14': 'sha224',
  '1.2.840.113549.1.1.11': 'sha256',
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
};

export const OID_OF_DIGEST: Record<Exclude<Digest, 'md5'>, string> = {
  sha1: '1.3.14.3.2.26', sha224: '2.16.840.1.101.3.4.2.4', sha256: '2.16.840.1.101.3.4.2.1', sha384: '2.16.840.1.101.3.4.2.2', sha512: '2.16.840.1.101.3.4.2.3',
};

/** The RFC 5751 micalg name of a digest, as we write it when the partner did not spell one. */
/** Each digest's output, in bytes. */
export const DIGEST_BYTES: Record<Digest, number> = { sha1: 20, sha224: 28, sha256: 32, sha384: 48, sha512: 64, md5: 16 };
export const MICALG_NAME: Record<Digest, string> = { sha1: 'sha-1', sha224: 'sha-224', sha256: 'sha-256', sha384: 'sha-384', sha512: 'sha-512', md5: 'md5' };

/**
 * A partner's spelling of a digest (`sha256`, `sha-256`, `SHA1`, `sha_256`, `sha2-256`) → the digest,
 * or null when unknown. MD5 only when the deployment allows it.
 */
export function digestFromName(name: string, allowMd5 = false): Digest | null {
  const n = name.trim().toLowerCase().replace(/[-_\s]/g, '').replace(/^sha2(?=\d{3})/, 'sha');
  if (n === 'md5') return allowMd5 ? 'md5' : null;
  return (['sha1', 'sha224', 'sha256', 'sha384', 'sha512'] as const).find((d) => d === n) ?? null;
}

export function digestFromOid(oid: string, allowMd5 = false): Digest {
  const digest = DIGEST_OIDS[oid];
  if (!digest || (digest === 'md5' && !allowMd5)) throw new As2Fault('unsupported-algorithm', `digest algorithm ${oid} is not supported`);
  return digest;
}

export interface ContentCipher { name: string; keyLength: number; gcm: boolean; block: number }

export const CONTENT_CIPHERS: Record<string, ContentCipher> = {
  '1.2.840.113549.3.7': { name: 'des-ede3-cbc', keyLength: 24, gcm: false, block: 8 },
  '2.16.840.1.101.3.4.1.2': { name: 'aes-128-cbc', keyLength: 16, gcm: false, block: 16 },
  '2.16.840.1.101.3.4.1.22': { name: 'aes-192-cbc', keyLength: 24, gcm: false, block: 16 },
  '2.16.840.1.101.3.4.1.42': { name: 'aes-256-cbc', keyLength: 32, gcm: false, block: 16 },
  '2.16.840.1.101.3.4.1.6': { name: 'aes-128-gcm', keyLength: 16, gcm: true, block: 16 },
  '2.16.840.1.101.3.4.1.26': { name: 'aes-192-gcm', keyLength: 24, gcm: true, block: 16 },
  '2.16.840.1.101.3.4.1.46': { name: 'aes-256-gcm', keyLength: 32, gcm: true, block: 16 },
};

export const OID = {
  data: '1.2.840.113549.1.7.1',
  signedData: '1.2.840.113549.1.7.2',
  envelopedData: '1.2.840.113549.1.7.3',
  authEnvelopedData: '1.2.840.113549.1.9.16.1.23',
  compressedData: '1.2.840.113549.1.9.16.1.9',
  zlib: '1.2.840.113549.1.9.16.3.8',
  rsaEncryption: '1.2.840.113549.1.1.1',
  rsaOaep: '1.2.840.113549.1.1.7',
  rsaPss: '1.2.840.113549.1.1.10',
  mgf1: '1.2.840.113549.1.1.8',
  /** RFC 4055 id-pSpecified: RSA-OAEP's label source (an empty label unless its OCTET STRING holds one). */
  pSpecified: '1.2.840.113549.1.1.9',
  contentTypeAttr: '1.2.840.113549.1.9.3',
  messageDigestAttr: '1.2.840.113549.1.9.4',
  signingTimeAttr: '1.2.840.113549.1.9.5',
  sha256WithRsa: '1.2.840.113549.1.1.11',
} as const;
