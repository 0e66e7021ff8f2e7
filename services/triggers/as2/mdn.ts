import { createHash, randomUUID } from 'node:crypto';
import { digestFromName, MICALG_NAME, type Digest } from './algorithms';
import type { As2Identity } from './certificates';
import { signingKey } from './rotation';
import { signDetached } from './sign';
import { parseMediaType, type MimeEntity } from './mime';
import { hashInSlices } from './slices';

/**
 * The Message Disposition Notification (RFC 4130 §7, RFC 3798; SPEC §4.3): a multipart/report with a
 * human part and a message/disposition-notification part, signed (multipart/signed with the receiver
 * certificate and the micalg the partner asked for) when Disposition-Notification-Options asks for a
 * pkcs7-signature receipt. AS2-From and AS2-To are the request's, swapped.
 */
export interface MdnOptions {
  signed: boolean;
  /** The partner's micalg tokens, in its order and spelling. */
  micalgs: string[];
}

/** `signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha256, sha1` */
export function parseMdnOptions(header: string | undefined): MdnOptions {
  const options: MdnOptions = { signed: false, micalgs: [] };
  for (const clause of (header ?? '').split(';')) {
    const eq = clause.indexOf('=');
    if (eq < 0) continue;
    const name = clause.slice(0, eq).trim().toLowerCase();
    const values = clause.slice(eq + 1).split(',').map((v) => v.trim()).filter(Boolean).slice(1); // first is the importance
    if (name === 'signed-receipt-protocol') options.signed = values.some((v) => v.toLowerCase() === 'pkcs7-signature');
    if (name === 'signed-receipt-micalg') options.micalgs = values;
  }
  return options;
}

/** The partner's first supported micalg (kept in its spelling), else the signer's, else SHA-256; MD5 only if allowed and `md5Ok`. */
function firstAsked(options: MdnOptions, signerDigest: Digest | null, allowMd5: boolean, md5Ok: boolean): { digest: Digest; name: string } {
  for (const token of options.micalgs) {
    const digest = digestFromName(token, allowMd5);
    if (digest && (md5Ok || digest !== 'md5')) return { digest, name: token };
  }
  const digest = signerDigest && (md5Ok || signerDigest !== 'md5') ? signerDigest : 'sha256';
  return { digest, name: MICALG_NAME[digest] };
}

/**
 * The receipt's signature algorithm. MD5 may be accepted on messages (AS2_ALLOW_MD5) but never signs a
 * receipt: a signed receipt that was asked for stays signed, with the next algorithm the partner lists
 * (or the signer's, or SHA-256).
 */
export function chooseMicalg(options: MdnOptions, signerDigest: Digest | null, allowMd5 = false): { digest: Exclude<Digest, 'md5'>; name: string } {
  return firstAsked(options, signerDigest, allowMd5, false) as { digest: Exclude<Digest, 'md5'>; name: string };
}

/**
 * The Received-Content-MIC algorithm. RFC 4130 §7.4.3: for a signed message it MUST be the one the
 * message was signed with (the partner compares it with the MIC it kept; pyas2lib, for one, reports a
 * mismatch otherwise), whatever signed-receipt-micalg asks for the receipt's signature; the partner's
 * spelling is kept when one of its tokens names that digest. Unsigned: as chooseMicalg.
 */
export function micAlgorithm(options: MdnOptions, signerDigest: Digest | null, allowMd5 = false): { digest: Digest; name: string } {
  if (!signerDigest) return firstAsked(options, null, allowMd5, true);
  const token = options.micalgs.find((t) => digestFromName(t, allowMd5) === signerDigest);
  return { digest: signerDigest, name: token ?? MICALG_NAME[signerDigest] };
}

/** Hashed in slices (slices.ts): the content is the whole decrypted message, tens of megabytes. */
export async function computeMic(content: Buffer, micalg: { digest: string; name: string }): Promise<string> {
  return `${(await hashInSlices(createHash(micalg.digest), content)).digest('base64')}, ${micalg.name}`;
}

export interface MdnInput {
  /** The request's headers (lower-case names). */
  headers: Record<string, string>;
  /** null → processed; else the disposition modifier and a human explanation. */
  failure: { modifier: string; detail: string } | null;
  /** `<base64>, <micalg>` when there is one to report. */
  mic: string | null;
  micalg: { digest: Exclude<Digest, 'md5'>; name: string };
  options: MdnOptions;
  /** The receiver's identity, whose newest valid key signs (rotation.ts); null answers unsigned. */
  identity: As2Identity | null;
  reportingUa: string;
  now?: Date;
}

export interface Mdn {
  headers: Record<string, string>;
  /** The MDN body (without the top-level headers, which are HTTP headers). */
  body: Buffer;
  messageId: string;
}

const CRLF = '\r\n';

export async function buildMdn(input: MdnInput): Promise<Mdn> {
  const h = input.headers;
  const now = input.now ?? new Date();
  const originalId = h['message-id'] ?? '';
  const recipient = h['as2-to'] ?? '';
  const disposition = input.failure
    ? `automatic-action/MDN-sent-automatically; processed/error: ${input.failure.modifier}`
    : 'automatic-action/MDN-sent-automatically; processed';
  const human = input.failure
    ? `The AS2 message ${originalId} was received but could not be processed: ${input.failure.detail}.`
    : `The AS2 message ${originalId} was received and accepted for processing.`;
  const fields = [
    `Reporting-UA: ${input.reportingUa}`,
    ...(recipient ? [`Original-Recipient: rfc822; ${recipient}`, `Final-Recipient: rfc822; ${recipient}`] : []),
    ...(originalId ? [`Original-Message-ID: ${originalId}`] : []),
    `Disposition: ${disposition}`,
    ...(input.mic ? [`Received-Content-MIC: ${input.mic}`] : []),
  ];
  const reportBoundary = `----=_report_${randomUUID()}`;
  const reportType = `multipart/report; report-type=disposition-notification; boundary="${reportBoundary}"`;
  const reportBody = [
    `--${reportBoundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    'Content-Transfer-Encoding: 7bit',
    '',
    ascii(human),
    `--${reportBoundary}`,
    'Content-Type: message/disposition-notification',
    'Content-Transfer-Encoding: 7bit',
    '',
    ...fields.map(ascii),
    '',
    `--${reportBoundary}--`,
    '',
  ].join(CRLF);

  const messageId = `<${randomUUID()}@${ascii(h['as2-to'] ?? 'ingress').replace(/[^A-Za-z0-9.-]/g, '') || 'ingress'}>`;
  const headers: Record<string, string> = {
    'as2-version': '1.2',
    'mime-version': '1.0',
    'message-id': messageId,
    date: now.toUTCString(),
    subject: 'Message Disposition Notification',
    // Tells partners (RFC 6362 §3) that they may send several attachments in one message.
    'ediint-features': 'multiple-attachments',
    ...(h['as2-to'] ? { 'as2-from': h['as2-to'] } : {}),
    ...(h['as2-from'] ? { 'as2-to': h['as2-from'] } : {}),
  };

  if (!input.options.signed || !input.identity) {
    return { headers: { ...headers, 'content-type': reportType }, body: Buffer.from(reportBody, 'latin1'), messageId };
  }
  const signedPart = Buffer.from(`Content-Type: ${reportType}${CRLF}${CRLF}${reportBody}`, 'latin1');
  const signature = (await signDetached(signedPart, input.micalg.digest, signingKey(input.identity, now.getTime()), now)).toString('base64').replace(/.{1,76}/g, (line) => line + CRLF);
  const outer = `----=_signed_${randomUUID()}`;
  const body = Buffer.concat([
    Buffer.from(`--${outer}${CRLF}`, 'latin1'),
    signedPart,
    Buffer.from([
      '',
      `--${outer}`,
      'Content-Type: application/pkcs7-signature; name=smime.p7s',
      'Content-Transfer-Encoding: base64',
      'Content-Disposition: attachment; filename=smime.p7s',
      '',
      signature + `--${outer}--`,
      '',
    ].join(CRLF), 'latin1'),
  ]);
  return {
    headers: { ...headers, 'content-type': `multipart/signed; protocol="application/pkcs7-signature"; micalg=${MICALG_NAME[input.micalg.digest]}; boundary="${outer}"` },
    body,
    messageId,
  };
}

/** Header-safe text: the partner's values came from HTTP headers, but stay 7-bit and on one line. */
function ascii(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?');
}

/**
 * Whether an opened payload is itself an MDN: a multipart/report whose report-type is disposition-notification
 * (RFC 3798 §3), or a bare message/disposition-notification.
 */
export function isMdn(payload: MimeEntity): boolean {
  const media = parseMediaType(payload.headers['content-type']);
  if (media.type === 'message/disposition-notification') return true;
  return media.type === 'multipart/report' && (media.params['report-type'] ?? '').trim().toLowerCase() === 'disposition-notification';
}
