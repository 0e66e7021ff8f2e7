import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Received } from '../../platform/avro/records';
import { withoutQuery } from '../../platform/logger/redact';
import { ObjectStoreError, type ObjectStore } from '../../platform/store/object-store';
import type { DecodeServices } from '../trigger';
import type { Mdn } from './mdn';

/**
 * Non-repudiation: the raw inbound message (its AS2 headers and body) and the MDN sent, kept per request
 * under `as2/<workflowId>/<message id>/<requestId>/{message,mdn}`: listing the message id's folder gives
 * every attempt, and no request (a partner's resend, or anyone naming someone else's message id) can
 * replace what an earlier one left. Kept only once the sender is authenticated (as2-trigger.ts): a
 * request refused at the envelope or before its pinned signature verified is logged, not stored.
 *
 * Who writes them:
 * - an accepted message: its processed MDN travels in the received record (`as2.mdn`, durable before it
 *   is sent), and the decoder writes both objects from the record (keepRecordedEvidence), off the answer
 *   path; until then the received log holds them.
 * - a message refused after the sender was authenticated (except for want of room in the memory budget, which
 *   keeps none: room.ts), or because the durable accept failed: the receiver writes them before it answers
 *   (keepEvidence).
 */
const safe = (value: string) => value.replace(/[^A-Za-z0-9._@+=-]/g, '_').replace(/^\.+/, '_').slice(0, 200);

/**
 * A message id as a folder name: readable, and one folder per id. Where making it safe changed it (a character
 * outside `A-Za-z0-9._@+=-`, a leading dot, past 200 characters), a hash of the whole id follows, or `<po!1@x>`
 * and `<po?1@x>` would share a folder, its evidence and its `first-request` marker, and the second would be
 * flagged a duplicate of the first. The angle brackets around an id are not part of it (RFC 5322 msg-id).
 */
function messageIdName(messageId: string): string {
  const id = messageId.replace(/^\s*<|>\s*$/g, '');
  const name = safe(id);
  return name === id ? name : `${name}~${createHash('sha256').update(id, 'utf8').digest('hex').slice(0, 32)}`;
}

/** `as2/<workflowId>/<message id>`: every attempt of a message id, and its `first-request` marker (decode.ts). */
export function messageFolder(workflowId: string, messageId: string): string {
  return `as2/${workflowId}/${messageIdName(messageId) || 'no-message-id'}`;
}

/** `as2/<workflowId>/<message id>/<requestId>`: the evidence of one request. */
export function evidenceFolder(workflowId: string, messageId: string, requestId: string): string {
  return `${messageFolder(workflowId, messageId)}/${safe(requestId) || 'no-request-id'}`;
}

/** Request headers worth keeping with the message (no credentials are among AS2's). */
const KEPT = ['content-type', 'content-transfer-encoding', 'message-id', 'as2-from', 'as2-to', 'as2-version', 'subject', 'date', 'disposition-notification-to', 'disposition-notification-options', 'receipt-delivery-option', 'ediint-features', 'mime-version'];

/**
 * The MDN's own headers, kept with its body: the asynchronous MDN is POSTed with these, so they are all that a
 * synchronous one says beside its body (EDIINT-Features too: it tells the partner what we can receive, RFC 6017).
 */
const MDN_HEADERS = ['content-type', 'message-id', 'as2-from', 'as2-to', 'as2-version', 'date', 'subject', 'mime-version', 'ediint-features'];

function entityHead(headers: Record<string, string>, names: readonly string[]): Buffer {
  const lines = names.filter((n) => headers[n] !== undefined).map((n) => `${n}: ${headers[n]}`);
  return Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1');
}

export function asEntity(headers: Record<string, string>, body: Buffer, names: readonly string[] = KEPT): Buffer {
  return Buffer.concat([entityHead(headers, names), body]);
}

/** The headers an AS2 message's evidence and received record keep a callback URL's query out of: the MDN URL's. */
export const CALLBACK_URL_HEADERS: readonly string[] = ['receipt-delivery-option'];

/**
 * The message as kept for evidence: its headers as the received record has them, the asynchronous MDN URL's query
 * (a partner's token) left out, which only the records the MDN is POSTed from need.
 */
export function messageEntity(headers: Record<string, string>, body: Buffer): Buffer {
  const kept = { ...headers };
  for (const name of CALLBACK_URL_HEADERS) if (kept[name] !== undefined) kept[name] = withoutQuery(kept[name]);
  return asEntity(kept, body);
}

/** The MDN as one MIME entity (headers, blank line, body): what is kept, and what `Received.as2.mdn` carries. */
export function mdnEntity(mdn: Mdn): Buffer {
  return asEntity(mdn.headers, mdn.body, MDN_HEADERS);
}

/** A MIME entity's headers (lower-case names) and body: how the mdn stage POSTs a recorded MDN. */
export function splitEntity(entity: Buffer): { headers: Record<string, string>; body: Buffer } {
  const end = entity.indexOf('\r\n\r\n');
  if (end < 0) throw new Error('the recorded MDN has no blank line after its headers');
  const headers: Record<string, string> = {};
  for (const line of entity.subarray(0, end).toString('latin1').split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { headers, body: entity.subarray(end + 4) };
}

const KEPT_AS = { contentType: 'message/rfc822' };

/** The receiver's copy, before it answers: replaces what is there (it is what was sent). */
export async function keepEvidence(store: ObjectStore, folder: string, message: Buffer | null, mdn: Buffer): Promise<void> {
  await Promise.all([
    message ? store.put(`${folder}/message`, message, KEPT_AS) : null,
    store.put(`${folder}/mdn`, mdn, KEPT_AS),
  ]);
}

/**
 * The decoder's copy of an accepted message's evidence, from its received record: the message (the
 * record's body, inline or claim check, with the request's AS2 headers) and the MDN the record carries.
 * Idempotent: each object is created only where none is (a replay or a retry writes nothing and does not
 * fail). An existing `message` holds the same bytes whoever wrote it. An existing `mdn` is the failure
 * MDN the receiver sent and stored because the append was reported failed although the record reached
 * the log: the recorded one was never sent, so it must not replace it (the create-only put decides
 * atomically, whichever of the two writes comes first).
 * Records written before the MDN travelled in them (`as2.mdn` null) had their evidence stored by the
 * receiver: nothing to do. Returns the objects written.
 */
export async function keepRecordedEvidence(received: Received, services: Pick<DecodeServices, 'store' | 'openBody'>): Promise<string[]> {
  const envelope = received.as2;
  if (!envelope?.mdn) return [];
  const folder = evidenceFolder(received.workflowId, envelope.messageId, received.requestId);
  const { store } = services;
  const created = async (path: string, body: () => Readable | Buffer): Promise<string[]> => {
    if (await store.head(path)) return [];
    try {
      await store.put(path, body(), { ...KEPT_AS, ifAbsent: true });
      return [path];
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === 'already-exists') return [];
      throw error;
    }
  };
  const head = entityHead(received.headers, KEPT);
  // A claim check streams from the store (opened only once the put reads it): the message is never held whole.
  async function* claimChecked(): AsyncGenerator<Buffer> {
    yield head;
    for await (const chunk of await services.openBody(received)) yield chunk as Buffer;
  }
  const message = () => (received.body.kind === 'inline' ? Buffer.concat([head, received.body.data]) : Readable.from(claimChecked()));
  const written = await Promise.all([created(`${folder}/message`, message), created(`${folder}/mdn`, () => envelope.mdn!)]);
  return written.flat();
}
