import type { ObjectStore } from '../platform/store/object-store';

/**
 * Whether an earlier request already carried the same identity (a warehouse PostId, an AS2 message id).
 * The first request decoded for an identity is recorded at `marker`; decoding that same request again
 * (a retry or a replay) is not a repeat, so the flag is the same every time a record is decoded.
 *
 * Races cannot occur in normal operation: records are keyed by workflow id, so one workflow's requests
 * are decoded one after another on one partition.
 */
export async function isRepeat(store: ObjectStore, marker: string, requestId: string): Promise<boolean> {
  if (!(await store.head(marker))) {
    await store.put(marker, Buffer.from(requestId, 'utf8'), { contentType: 'text/plain' });
    return false;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of await store.get(marker)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8') !== requestId;
}
