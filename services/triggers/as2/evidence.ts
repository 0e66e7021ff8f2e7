import type { ObjectStore } from '../../platform/store/object-store';

/**
 * Non-repudiation: the raw inbound message (its AS2 headers and body) and the MDN sent, kept per request
 * under `as2/<workflowId>/<message id>/<requestId>/{message,mdn}`: listing the message id's folder gives
 * every attempt, and no request (a partner's resend, or anyone naming someone else's message id) can
 * replace what an earlier one left. Kept only once the sender is authenticated (as2-trigger.ts): a
 * request refused at the envelope or before its pinned signature verified is logged, not stored.
 */
const safe = (value: string) => value.replace(/^\s*<|>\s*$/g, '').replace(/[^A-Za-z0-9._@+=-]/g, '_').replace(/^\.+/, '_').slice(0, 200);

/** `as2/<workflowId>/<message id>`: every attempt of a message id, and its `first-request` marker (decode.ts). */
export function messageFolder(workflowId: string, messageId: string): string {
  return `as2/${workflowId}/${safe(messageId) || 'no-message-id'}`;
}

/** `as2/<workflowId>/<message id>/<requestId>`: the evidence of one request. */
export function evidenceFolder(workflowId: string, messageId: string, requestId: string): string {
  return `${messageFolder(workflowId, messageId)}/${safe(requestId) || 'no-request-id'}`;
}

/** Request headers worth keeping with the message (no credentials are among AS2's). */
const KEPT = ['content-type', 'content-transfer-encoding', 'message-id', 'as2-from', 'as2-to', 'as2-version', 'subject', 'date', 'disposition-notification-to', 'disposition-notification-options', 'receipt-delivery-option', 'ediint-features', 'mime-version'];

export function asEntity(headers: Record<string, string>, body: Buffer, names: readonly string[] = KEPT): Buffer {
  const lines = names.filter((n) => headers[n] !== undefined).map((n) => `${n}: ${headers[n]}`);
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1'), body]);
}

export async function keepEvidence(store: ObjectStore, folder: string, message: Buffer | null, mdn: Buffer): Promise<void> {
  await Promise.all([
    message ? store.put(`${folder}/message`, message, { contentType: 'message/rfc822' }) : null,
    store.put(`${folder}/mdn`, mdn, { contentType: 'message/rfc822' }),
  ]);
}
