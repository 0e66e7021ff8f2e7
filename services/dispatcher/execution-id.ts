import { hash } from 'node:crypto';
import type { DecodedItem } from '../platform/avro/records';

/**
 * The execution id of the item at `sourceIndex` of request `requestId`: a name-based UUID (version 5 layout
 * over SHA-256), so a replay or a redelivery yields the same id and downstream can de-duplicate.
 */
export function executionId(requestId: string, sourceIndex: number): string {
  // The digest as hex (a third of the CPU of a Buffer digest); the version nibble is 5, and the variant's two
  // high bits 10 keep the digest's next two bits.
  const x = hash('sha256', `ingress/execution/${requestId}/${sourceIndex}`, 'hex');
  const variant = '89ab'[parseInt(x[16], 16) & 3];
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-5${x.slice(13, 16)}-${variant}${x.slice(17, 20)}-${x.slice(20, 32)}`;
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
