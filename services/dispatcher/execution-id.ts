import { createHash } from 'node:crypto';

/**
 * The execution id of item `batchIndex` of request `requestId`: a name-based UUID (version 5 layout over
 * SHA-256), so a replay or a redelivery yields the same id and downstream can de-duplicate.
 */
export function executionId(requestId: string, batchIndex: number): string {
  const h = createHash('sha256').update(`ingress/execution/${requestId}/${batchIndex}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
