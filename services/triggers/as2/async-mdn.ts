import type { MdnDelivery, Received } from '../../platform/avro/records';
import { allowedBy, loggableUrl, parseTarget } from '../../platform/net/url-allow-list';
import { splitEntity } from './evidence';
import type { As2Identity } from './certificates';
import { As2Fault } from './faults';
import { as2Parameters, type As2Parameters } from './parameters';
import type { CredentialDocument, WorkflowDocument } from '../../platform/registry/documents';
import { webhookParameters } from '../webhook/parameters';

/**
 * An asynchronous MDN request (RFC 4130 §7.3, Receipt-Delivery-Option): the URL, and the allow-list entry
 * (the credential's `asyncMdnUrls`, then the node's) that allows it. A URL no entry matches is refused before
 * anything is accepted (async-mdn-url-not-allowed), with a synchronous failure MDN: the partner learns why,
 * and we never call a URL the partner alone chose (docs/as2-async-mdn.md, SSRF rules).
 */
export interface AsyncMdnTarget {
  url: string;
  /** The allow-list entry that matched, as configured: what the delivery checks the dialled address against. */
  allowedBy: string;
}

/** null: a synchronous MDN was asked for. */
export function asyncMdnTarget(headers: Record<string, string>, identity: As2Identity, params: As2Parameters): AsyncMdnTarget | As2Fault | null {
  const value = headers['receipt-delivery-option'];
  if (value === undefined || value.trim() === '') return null;
  const target = parseTarget(value);
  if ('problem' in target) return new As2Fault('async-mdn-url-not-allowed', `the Receipt-Delivery-Option cannot be delivered to: ${target.problem}`);
  const entry = allowedBy(target.url, [...identity.asyncMdnUrls, ...params.asyncMdnUrls]);
  // The URL asked for goes to the logs (its query elided), so that an operator can see what to allow.
  if (!entry) return new As2Fault('async-mdn-url-not-allowed', 'the Receipt-Delivery-Option URL is not on this receiver\'s list of asynchronous MDN URLs for the partner; ask the receiver to add it, or request a synchronous MDN', `asked for ${loggableUrl(target.url.href)}`);
  return { url: target.url.href, allowedBy: entry.text };
}

/**
 * The delivery the decoder writes for a received record that asked for an asynchronous MDN (null otherwise):
 * no attempts yet, the MDN the recorded one, byte for byte. Its first attempt is due `firstAttemptDelayMs`
 * after the record was appended (`appendedAt`, the log's time of it). The receiver may have been told that
 * append failed although it reached the log; it then answers a failure MDN and keeps it, and the stage
 * must find that evidence before its first check. It is kept within the append timeout plus a margin of
 * the append (AS2_MDN_FIRST_ATTEMPT_DELAY), and the decoder may read the record long before that.
 */
export function mdnDeliveryOf(received: Received, appendedAt: number, firstAttemptDelayMs: number): MdnDelivery | null {
  const as2 = received.as2;
  if (!as2?.asyncMdn || !as2.mdn) return null;
  return {
    requestId: received.requestId, workflowId: received.workflowId, messageId: as2.messageId,
    mdnMessageId: splitEntity(as2.mdn).headers['message-id'] ?? '', url: as2.asyncMdn.url, allowedBy: as2.asyncMdn.allowedBy,
    mdn: as2.mdn, receivedAt: received.receivedAt, dueAt: Math.max(received.receivedAt, appendedAt) + firstAttemptDelayMs, attempts: [],
  };
}

/** What the mdn stage reads of the registry, as it is now (cached for WORKFLOW_CACHE_MS). */
export interface AllowListLookups {
  workflow(id: string): Promise<WorkflowDocument | null>;
  credential(id: string): Promise<CredentialDocument | null>;
}

/**
 * Is the allow-list entry a delivery was recorded with still listed, on one of the workflow's AS2 nodes or on
 * the credential such a node names? An operator who removes an entry (a partner's endpoint compromised, or
 * moved) must stop the attempts already queued, not only refuse new requests. A workflow deactivated or
 * deleted since is no such verdict: what it accepted was answered processed, and its MDN still goes out to the
 * entry recorded at the accept (as the decoder's dead letters' MDNs do). A registry that cannot be read
 * throws: the attempt is put off, never taken as a verdict either way.
 */
export async function allowListEntryListed(workflowId: string, entry: string, lookups: AllowListLookups): Promise<boolean> {
  const workflow = await lookups.workflow(workflowId);
  if (!workflow) return true;
  for (const node of workflow.nodes) {
    if (node.type !== 'webhook' || webhookParameters(node).protocol !== 'as2') continue;
    const params = as2Parameters(node);
    if (params.asyncMdnUrls.some((p) => p.text === entry)) return true;
    const credential = params.credentialId ? await lookups.credential(params.credentialId) : null;
    if (credential?.type === 'as2ReceiverAuth' && (credential.data.asyncMdnUrls ?? []).includes(entry)) return true;
  }
  return false;
}
