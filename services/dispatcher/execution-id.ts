import { hash } from 'node:crypto';
import type { DecodedItem } from '../platform/avro/records';

/**
 * The execution id of the item at `sourceIndex` of request `requestId`: a name-based UUID (version 5 layout
 * over SHA-256), so a replay or a redelivery yields the same id and downstream can de-duplicate.
 */
export function executionId(requestId: string, sourceIndex: number): string {
  const h = hash('sha256', `ingress/execution/${requestId}/${sourceIndex}`, 'buffer');
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * What an item's execution id derives from: its place in the request as sent (the Message, the attachment),
 * which no workflow setting changes. Numbering items by their place in `items` instead let a replay after an
 * Action filter changed hand one Message's id to another. A record written before `sourceIndex` existed
 * (null) falls back to that place in `items`, which is what its ids were derived from when it was first
 * dispatched: replaying an old decoded record keeps its ids. The two agree whenever nothing was skipped
 * before an item, so only a request whose filter skipped an earlier Message gets new ids for the later ones,
 * and only when it is decoded again.
 */
export function sourceIndexOf(item: Pick<DecodedItem, 'sourceIndex'>, position: number): number {
  return item.sourceIndex ?? position;
}
