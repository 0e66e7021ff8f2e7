import type { Digest } from './algorithms';
import type { As2Identity } from './certificates';
import { decompressEntity } from './compress';
import { decryptEntity } from './decrypt';
import { As2Fault } from './faults';
import { decodedBody, multipartParts, parseEntity, parseMediaType, type MimeEntity } from './mime';
import { verifyDetached } from './verify';

/**
 * The layers of an AS2 message, outside in, as senders stack them: encryption (enveloped data),
 * signature (multipart/signed) and RFC 5402 compression before or after signing, in any order, each at
 * most a few times. What comes out is the payload entity and what the MIC must cover (RFC 4130
 * §7.3.1): exactly the signed part when signed, else the decrypted entity, else the body as received.
 */
export interface Unwrapped {
  payload: MimeEntity;
  encrypted: boolean;
  signed: boolean;
  compressed: boolean;
  micContent: Buffer;
  signerDigest: Digest | null;
  signerFingerprint: string | null;
}

export interface UnwrapOptions {
  identity: As2Identity;
  maxInflatedBytes: number;
  allowMd5?: boolean;
  /** Told of each step, for the structured logs (as2.decrypt-start, …). */
  onStep?(step: 'decrypt-start' | 'decrypt-success' | 'decrypt-failure' | 'verify-success' | 'verify-failure', detail?: string): void;
}

const MAX_LAYERS = 6;
const PKCS7_MIME = new Set(['application/pkcs7-mime', 'application/x-pkcs7-mime']);

/** `contentType` and `transferEncoding` are the HTTP headers of the request; `body` its bytes. */
export function unwrapMessage(body: Buffer, contentType: string | null, transferEncoding: string | null, options: UnwrapOptions): Unwrapped {
  const headers: Record<string, string> = { 'content-type': contentType ?? '' };
  if (transferEncoding) headers['content-transfer-encoding'] = transferEncoding;
  let entity: MimeEntity = { headers, body, raw: body };
  const result = { encrypted: false, signed: false, compressed: false, micContent: body, signerDigest: null as Digest | null, signerFingerprint: null as string | null };

  for (let layer = 0; ; layer++) {
    if (layer > MAX_LAYERS) throw new As2Fault('malformed-message', 'the message nests too many layers');
    const media = parseMediaType(entity.headers['content-type']);
    if (PKCS7_MIME.has(media.type)) {
      const smime = (media.params['smime-type'] ?? 'enveloped-data').toLowerCase();
      const der = decodedBody(entity);
      if (smime === 'compressed-data') {
        entity = decompressEntity(der, options.maxInflatedBytes);
        result.compressed = true;
      } else if (smime === 'enveloped-data' || smime === 'authenveloped-data') {
        options.onStep?.('decrypt-start');
        try {
          entity = decryptEntity(der, options.identity);
        } catch (error) {
          options.onStep?.('decrypt-failure', (error as Error).message);
          throw error;
        }
        options.onStep?.('decrypt-success');
        if (!result.encrypted && !result.signed) result.micContent = entity.raw;
        result.encrypted = true;
      } else {
        throw new As2Fault('unsupported-algorithm', `S/MIME type ${smime.slice(0, 40)} is not supported (sign with multipart/signed)`);
      }
    } else if (media.type === 'multipart/signed') {
      const parts = multipartParts(entity.body, media.params.boundary);
      if (parts.length !== 2) throw new As2Fault('malformed-message', 'multipart/signed must have exactly two parts');
      const signature = parseEntity(parts[1]);
      let check;
      try {
        check = verifyDetached(decodedBody(signature), parts[0], options.identity.partner, options.allowMd5);
      } catch (error) {
        options.onStep?.('verify-failure', (error as Error).message);
        throw error;
      }
      options.onStep?.('verify-success');
      if (!result.signed) {
        result.micContent = parts[0];
        result.signerDigest = check.digest;
        result.signerFingerprint = check.signerFingerprint;
      }
      result.signed = true;
      entity = parseEntity(parts[0]);
    } else {
      break;
    }
  }
  if (options.identity.partner && !result.signed) {
    throw new As2Fault('insufficient-message-security', 'the message is not signed, but a partner certificate is configured for this trigger');
  }
  return { payload: entity, ...result };
}

/** The payload's attachments: the parts of a multipart/mixed under RFC 6362, else the payload itself. */
export function attachmentsOf(payload: MimeEntity, multipleAttachments: boolean): MimeEntity[] {
  const media = parseMediaType(payload.headers['content-type']);
  if (!multipleAttachments || media.type !== 'multipart/mixed') return [payload];
  return multipartParts(payload.body, media.params.boundary).map(parseEntity);
}
