import type { DecodedItem, Received } from '../../platform/avro/records';
import { IngressError } from '../answers';
import type { DecodeServices } from '../trigger';
import { sanitizeFilename, stagedMediaType, stagingFolder, uniqueNamer } from '../staged-files';
import { isRepeat } from '../first-request';
import { firstSighting } from '../first-sighting';
import { openingIdentityOf } from './certificates';
import { keepRecordedEvidence, messageFolder } from './evidence';
import { As2Fault } from './faults';
import { filenameOf, parseMediaType } from './mime';
import { hasMultipleAttachments, unwrapMessage } from './unwrap';

/**
 * Decoder side of AS2: the received record holds the raw message and the MDN sent (the source of truth,
 * replayable). The non-repudiation evidence is written from it (evidence.ts, idempotently) while the
 * payload is decrypted again here with the credential as it is now and staged under
 * `trigger/<workflowId>/<timestamp>/<filename>`, and given one item per attachment (RFC 6362).
 * It is opened with the credential's current keys and those earlier puts retired, and with the very key the receiver
 * opened it with (recorded in the record), so a rotation does not strand records already accepted; and without the pin or the MD5 refusal, which the receiver applied when it accepted it. A message that no longer opens (its key was dropped with `--forget-retired`) is a
 * permanent fault: it is dead-lettered and can be replayed once the old key is put back.
 */
/** A credential whose certificates the decoder reads past a fault (As2Identity.warnings), by id and what: warned once, again when that changes. */
const warnedFirstSeen = firstSighting();

export interface As2DecodeLimits {
  maxInflatedBytes: number;
  maxMessageBytes: number;
}

export async function decodeAs2(received: Received, credentialId: string | null, limits: As2DecodeLimits, services: DecodeServices): Promise<DecodedItem[]> {
  // The evidence is written while the message is opened and staged, and is settled before this record's
  // outcome is: a record decoded or dead-lettered has its evidence, and a failure to write it is retried.
  const evidence = keepRecordedEvidence(received, services).then((kept) => {
    if (kept.length) services.logger.info('as2.evidence-stored', { event: 'as2.evidence-stored', workflowId: received.workflowId, messageId: received.as2?.messageId ?? null, requestId: received.requestId, objects: kept });
  });
  evidence.catch(() => undefined); // awaited below; not an unhandled rejection meanwhile
  try {
    return await openAndStage(received, credentialId, limits, services);
  } finally {
    await evidence;
  }
}

async function openAndStage(received: Received, credentialId: string | null, limits: As2DecodeLimits, services: DecodeServices): Promise<DecodedItem[]> {
  if (!credentialId || !services.credential) throw new IngressError('credential-unavailable', 'the AS2 node has no receiver credential to decrypt with');
  // A credential that cannot be read now is retried (and dead-lettered after the bounded retries).
  const credential = await services.credential(credentialId);
  if (!credential || credential.type !== 'as2ReceiverAuth') throw new IngressError('credential-unavailable', `AS2 credential ${credentialId} is missing or not an as2ReceiverAuth credential`);
  const identity = openingIdentityOf(credential.data);
  if (identity.warnings.length > 0 && warnedFirstSeen.changed(identity.warnings.join('\n'), credentialId)) {
    services.logger.warn('AS2 credential certificate is malformed or unreadable; read past it', { workflowId: received.workflowId, credentialId, warnings: identity.warnings });
  }
  const raw = await services.readBody(received, limits.maxMessageBytes);
  let attachments;
  try {
    // The same opening as the receiver's inspect (unwrap.ts), attachments and transfer encodings included.
    const opened = await unwrapMessage(raw, received.contentType, received.headers['content-transfer-encoding'] ?? null, {
      // The receiver decided who may send, and answered `processed`: the pin and AS2_ALLOW_MD5 as they were
      // then. A pin added since, or MD5 turned off, must not strand what was accepted before (a backlog, a replay):
      // the message is opened without a pin (its signature still verified, with the certificate it carries, or
      // a partner certificate valid at receipt) and with MD5 allowed, only to take its payload out again.
      // And with the receiver key that opened it at receipt (recorded in the record), not one chosen again from the
      // credential as it is now (rotation.ts namedReceiverKey).
      identity: { ...identity, pinned: false, openedWith: received.as2?.receiverKey ?? null }, maxInflatedBytes: limits.maxInflatedBytes, allowMd5: true,
      multipleAttachments: hasMultipleAttachments(received.headers),
      // Certificates are judged at the time of receipt, as the receiver judged them: a replay after a partner certificate expired still opens.
      receivedAt: received.receivedAt,
    });
    attachments = opened.attachments;
    // An unsecured message's payload headers are the HTTP headers: its file name is in the request's Content-Disposition (pyas2lib sends it there).
    const disposition = received.headers['content-disposition'];
    if (!opened.encrypted && !opened.signed && !opened.compressed && disposition && attachments.length === 1 && !attachments[0].entity.headers['content-disposition']) {
      attachments[0].entity.headers['content-disposition'] = disposition;
    }
  } catch (error) {
    if (error instanceof As2Fault) throw new IngressError('payload-parse-error', `the AS2 message cannot be opened: ${error.modifier}: ${error.reason ?? error.message}`);
    throw error;
  }

  const folder = stagingFolder(received.workflowId, received.receivedAt, received.requestId);
  const unique = uniqueNamer();
  const envelope = received.as2;
  const messageId = envelope?.messageId ?? received.headers['message-id'] ?? '';
  const duplicate = messageId ? await isRepeat(services.store, `${messageFolder(received.workflowId, messageId)}/first-request`, received.requestId) : false;
  const batch = attachments.length > 1;
  const items: DecodedItem[] = [];
  for (const [index, { entity, bytes }] of attachments.entries()) {
    const contentType = stagedMediaType(parseMediaType(entity.headers['content-type']).type);
    const filename = unique(sanitizeFilename(filenameOf(entity) ?? `payload${batch ? `-${index + 1}` : ''}${extensionOf(contentType)}`));
    const path = `${folder}/${filename}`;
    await services.store.put(path, bytes, { contentType });
    const as2 = {
      from: envelope?.from ?? received.headers['as2-from'] ?? '',
      to: envelope?.to ?? received.headers['as2-to'] ?? '',
      messageId,
      receivedAt: new Date(received.receivedAt).toISOString(),
      contentType,
      subject: envelope?.subject ?? received.headers.subject ?? '',
      filename,
      ...(batch ? { batchIndex: index, batchSize: attachments.length } : {}),
      ...(duplicate ? { duplicate: true } : {}),
    };
    items.push({ value: JSON.stringify({ file: path, as2 }), files: [path], sourceIndex: index });
  }
  return items;
}

/** Bytes a value takes as JSON text in UTF-8. */
const jsonBytes = (value: string) => Buffer.byteLength(JSON.stringify(value));
/** A sanitised file name is at most 200 bytes (staged-files.ts); as JSON, quotes doubled, with a ` (n)` suffix. */
const FILENAME_JSON_BYTES = 2 * 200 + 16;
/** Keys, punctuation, receivedAt, batch fields, `duplicate` and the record's own framing, per item. */
const ITEM_OVERHEAD_BYTES = 512;

/**
 * An upper bound of the bytes openAndStage's items take in the decoded record. Every item repeats the
 * envelope's header values (SPEC §2.2), which the sender sizes; the receiver refuses a message whose items
 * could not fit one record, so that nothing answered processed fails here for its size.
 */
export function decodedBytesBound(workflowId: string, headers: Record<string, string>, attachments: readonly { entity: { headers: Record<string, string> } }[]): number {
  const envelope = ['as2-from', 'as2-to', 'message-id', 'subject'].reduce((n, name) => n + jsonBytes(headers[name] ?? ''), 0);
  // The path appears twice in an item (its value and its files) and the file name once more.
  const path = jsonBytes(stagingFolder(workflowId, 0, '')) + 16 + FILENAME_JSON_BYTES;
  let total = 0;
  for (const { entity } of attachments) {
    total += ITEM_OVERHEAD_BYTES + envelope + 2 * path + FILENAME_JSON_BYTES + jsonBytes(stagedMediaType(parseMediaType(entity.headers['content-type']).type));
  }
  return total;
}

const EXTENSIONS: Record<string, string> = {
  'application/edi-x12': '.x12', 'application/edifact': '.edi', 'application/edi-consent': '.edi',
  'application/xml': '.xml', 'text/xml': '.xml', 'application/json': '.json', 'text/plain': '.txt', 'text/csv': '.csv', 'application/pdf': '.pdf',
};
const extensionOf = (type: string) => EXTENSIONS[type] ?? '.bin';
