import type { Digest } from './algorithms';
import type { As2Identity } from './certificates';
import { decompressEntity, type HeadCheck, type InflateBudget } from './compress';
import { DECRYPTION_FAILED, decryptEntity } from './decrypt';
import { As2Fault } from './faults';
import { decodedBodyInSlices, multipartParts, parseEntity, parseMediaType, type MimeEntity } from './mime';
import { someReceiverValidAt } from './rotation';
import { verifyDetached } from './verify';
import { heldShare, type HeldBytes, type HeldShare } from '../held-bytes';
import { takeRoom } from './room';

/**
 * The layers of an AS2 message, outside in, as senders stack them: encryption (enveloped data),
 * signature (multipart/signed) and RFC 5402 compression before or after signing, in any order, each at
 * most a few times. What comes out is the payload entity, its attachments decoded exactly as the decoder
 * stages them (so nothing answered `processed` can fail to open later), and what the MIC must cover
 * (RFC 4130 §7.3.1): exactly the signed part when signed, else the decrypted entity, else the body as
 * received.
 *
 * No oracle on encrypted content: once an enveloped layer was opened (key transport done), every fault
 * that depends on the decrypted bytes — cipher, padding, MIME, compression, signature, pin, missing
 * signature, attachments — is answered `decryption-failed` with one fixed text. The real reason goes to
 * the server log only (As2Fault.reason). Faults decided before that (envelope structure, key transport
 * algorithm, an outer signature over ciphertext) keep their own disposition, and so does a signature
 * that holds with a certificate other than the pinned one (`signer-not-pinned`, authentication-failed):
 * tampered ciphertext cannot produce a valid signature, so that answer tells an attacker nothing.
 */
export interface Unwrapped {
  payload: MimeEntity;
  /** The payload's attachments (RFC 6362) with their transfer encoding undone. */
  attachments: { entity: MimeEntity; bytes: Buffer }[];
  encrypted: boolean;
  signed: boolean;
  compressed: boolean;
  micContent: Buffer;
  signerDigest: Digest | null;
  signerFingerprint: string | null;
  /** The key fingerprint (CertificateFacts.keyFingerprint) of the receiver key that opened the outermost enveloped layer; null when not encrypted. */
  receiverKey: string | null;
}

export interface UnwrapOptions {
  identity: As2Identity;
  maxInflatedBytes: number;
  allowMd5?: boolean;
  /**
   * The memory budget of all requests together, which each layer's output (decoded, decrypted, inflated)
   * takes room in (the receiver's; see InflateBudget), given back when unwrapMessage returns. Or `share`:
   */
  held?: HeldBytes | null;
  /**
   * The message's own share of that budget, already holding the raw message (whole-body.ts hold): the layers
   * take room in it too, and the caller releases it once it is done with what was returned (the MDN made).
   */
  share?: HeldShare;
  /** `EDIINT-Features: multiple-attachments` was sent: a multipart/mixed payload is split. */
  multipleAttachments?: boolean;
  /**
   * When the message was received (ms since the epoch; now when not given): certificates are judged valid
   * or not at this time, by the receiver and by the decoder opening the message later alike.
   */
  receivedAt?: number;
  /** Told of each step, for the structured logs (as2.decrypt-start, …). */
  onStep?(step: 'decrypt-start' | 'decrypt-success' | 'decrypt-failure' | 'verify-success' | 'verify-failure', detail?: string): void;
}

/**
 * What the receiver inflates at most per message, all compressed layers together, whatever
 * MAX_INFLATED_BYTES says: inflation can happen before any signature was checked (compressed outside the
 * signature), so this is what an unauthenticated sender can make the receiver hold.
 */
export const AS2_MAX_INFLATED_BYTES = 64 * 1024 * 1024;

const MAX_LAYERS = 6;
const PKCS7_MIME = new Set(['application/pkcs7-mime', 'application/x-pkcs7-mime']);

/** `contentType` and `transferEncoding` are the HTTP headers of the request; `body` its bytes. */
export async function unwrapMessage(body: Buffer, contentType: string | null, transferEncoding: string | null, options: UnwrapOptions): Promise<Unwrapped> {
  const state = { sealed: false };
  const limit = Math.min(options.maxInflatedBytes, AS2_MAX_INFLATED_BYTES);
  const budget: InflateBudget = { left: limit, total: limit, held: options.share ?? heldShare(options.held ?? null) };
  try {
    return await unwrapLayers(body, contentType, transferEncoding, options, state, budget);
  } catch (error) {
    // A signature that holds with another certificate than the pinned one is named as such even inside
    // encryption: only a valid signature over the content produces it, which tampering cannot. A message
    // refused for want of memory is to be sent again, not given up as undecryptable.
    // So is a valid signature by a certificate outside its validity (decided after the signature held).
    if (!state.sealed || (error instanceof As2Fault && (error.code === 'signer-not-pinned' || error.code === 'signer-outside-validity' || error.code === 'not-accepted'))) throw error;
    const reason = error instanceof As2Fault ? `${error.code}: ${error.reason ?? error.message}` : 'unexpected error';
    throw new As2Fault('decryption-failed', DECRYPTION_FAILED, reason);
  } finally {
    // The caller's share is the caller's to release; else the layers live on in what is returned only until
    // the MDN is made, a moment later.
    if (!options.share) budget.held.release();
  }
}

async function unwrapLayers(body: Buffer, contentType: string | null, transferEncoding: string | null, options: UnwrapOptions, state: { sealed: boolean }, budget: InflateBudget): Promise<Unwrapped> {
  const headers: Record<string, string> = { 'content-type': contentType ?? '' };
  if (transferEncoding) headers['content-transfer-encoding'] = transferEncoding;
  let entity: MimeEntity = { headers, body, raw: body };
  const result = { encrypted: false, signed: false, compressed: false, micContent: body, signerDigest: null as Digest | null, signerFingerprint: null as string | null, receiverKey: null as string | null };
  const partners = options.identity.partners;
  const pinned = options.identity.pinned;
  const receivedAt = options.receivedAt ?? Date.now();

  for (let layer = 0; ; layer++) {
    if (layer > MAX_LAYERS) throw new As2Fault('malformed-message', 'the message nests too many layers');
    const media = parseMediaType(entity.headers['content-type']);
    if (PKCS7_MIME.has(media.type)) {
      const smime = (media.params['smime-type'] ?? 'enveloped-data').toLowerCase();
      const der = await heldBody(entity, budget.held);
      if (smime === 'compressed-data') {
        // A pinned partner must sign: an inner entity that can lead to no signature is refused from its headers.
        entity = await decompressEntity(der, budget, pinned && !result.signed ? mustLeadToSignature : undefined);
        result.compressed = true;
      } else if (smime === 'enveloped-data' || smime === 'authenveloped-data') {
        // The decrypted layer is as long as the encrypted content at most: its room is taken before it is made.
        takeRoom(budget.held, der.length);
        options.onStep?.('decrypt-start');
        try {
          someReceiverValidAt(options.identity, receivedAt);
          entity = await decryptEntity(der, options.identity, receivedAt, (key) => { result.receiverKey ??= key.receiver.keyFingerprint; });
        } catch (error) {
          options.onStep?.('decrypt-failure', error instanceof As2Fault ? (error.reason ?? error.message) : 'unexpected error');
          throw error;
        }
        state.sealed = true;
        options.onStep?.('decrypt-success');
        if (!result.encrypted && !result.signed) result.micContent = entity.raw;
        result.encrypted = true;
      } else {
        throw new As2Fault('unsupported-algorithm', `S/MIME type ${token(smime)} is not supported (sign with multipart/signed)`);
      }
    } else if (media.type === 'multipart/signed') {
      const parts = multipartParts(entity.body, media.params.boundary);
      if (parts.length !== 2) throw new As2Fault('malformed-message', 'multipart/signed must have exactly two parts');
      // The signature part is decoded as the payload is, counted and in slices: a sender decides its size.
      let check;
      try {
        const signature = await heldBody(parseEntity(parts[1]), budget.held);
        check = verifyDetached(signature, parts[0], partners, options.allowMd5, receivedAt, pinned);
      } catch (error) {
        // A signature part that cannot be parsed or decoded is a failed verification; no room for it is not.
        if (!(error instanceof As2Fault && error.code === 'not-accepted')) options.onStep?.('verify-failure', (error as Error).message);
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
  if (pinned && !result.signed) {
    throw new As2Fault('insufficient-message-security', 'the message is not signed, but a partner certificate is configured for this trigger');
  }
  const attachments: Unwrapped['attachments'] = [];
  for (const part of attachmentsOf(entity, options.multipleAttachments ?? false)) attachments.push({ entity: part, bytes: await heldBody(part, budget.held) });
  return { payload: entity, attachments, ...result };
}

/**
 * The entity's body with its transfer encoding undone. A decoded copy (base64, quoted-printable) takes room
 * in `held` first, as much as the encoded body, which it never outgrows; a binary body is the entity's own bytes.
 */
async function heldBody(entity: MimeEntity, held: HeldShare): Promise<Buffer> {
  const cte = (entity.headers['content-transfer-encoding'] ?? 'binary').trim().toLowerCase();
  const copied = cte !== 'binary' && cte !== '8bit' && cte !== '7bit';
  if (copied) takeRoom(held, entity.body.length);
  return decodedBodyInSlices(entity);
}

/** For a pinned partner before any signature: only another layer (signed or S/MIME) may follow. */
const mustLeadToSignature: HeadCheck = (head) => {
  let type: string;
  try {
    type = parseMediaType(parseEntity(head).headers['content-type']).type;
  } catch {
    return new As2Fault('decompression-failed', 'the decompressed data is not a MIME entity');
  }
  if (type === 'multipart/signed' || PKCS7_MIME.has(type)) return null;
  return new As2Fault('insufficient-message-security', 'the message is not signed, but a partner certificate is configured for this trigger');
};

/** A header token for a fault detail: no payload bytes, bounded. */
const token = (value: string) => value.replace(/[^A-Za-z0-9._+-]/g, '?').slice(0, 40);

/** RFC 6362: the sender announces multiple attachments with `EDIINT-Features: multiple-attachments`. */
export function hasMultipleAttachments(headers: Record<string, string>): boolean {
  return /multiple-attachments/i.test(headers['ediint-features'] ?? '');
}

/** The payload's attachments: the parts of a multipart/mixed under RFC 6362, else the payload itself. */
export function attachmentsOf(payload: MimeEntity, multipleAttachments: boolean): MimeEntity[] {
  const media = parseMediaType(payload.headers['content-type']);
  if (!multipleAttachments || media.type !== 'multipart/mixed') return [payload];
  return multipartParts(payload.body, media.params.boundary).map(parseEntity);
}
