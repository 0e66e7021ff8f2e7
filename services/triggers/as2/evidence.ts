import type { ObjectStore } from '../../platform/store/object-store';

/**
 * Non-repudiation: the raw inbound message (its AS2 headers and body) and the MDN sent, kept under
 * `as2/<workflowId>/<message id>/{message,mdn}` so either can be fetched by message id
 * (`ingress blob get as2/<workflowId>/<message id>/mdn`). A partner's retry of the same message id
 * replaces both with the latest copy.
 */
export function evidenceFolder(workflowId: string, messageId: string): string {
  const id = messageId.replace(/^\s*<|>\s*$/g, '').replace(/[^A-Za-z0-9._@+=-]/g, '_').replace(/^\.+/, '_').slice(0, 200);
  return `as2/${workflowId}/${id || 'no-message-id'}`;
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
