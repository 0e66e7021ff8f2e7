import { ObjectStoreError, readObject, type ObjectStore } from '../platform/store/object-store';

/**
 * Whether an earlier request already carried the same identity (a warehouse PostId, an AS2 message id).
 * The first request decoded for an identity is recorded at `marker`; decoding that same request again
 * (a retry or a replay) is not a repeat, so the flag is the same every time a record is decoded.
 *
 * The marker is created only where none is (a conditional put the store decides atomically), so requests
 * decoded at the same moment cannot both be the first: that happens when records are keyed by request
 * (RECORD_KEY=request), where one workflow's requests are decoded on several partitions at once. Keyed by
 * workflow, they are decoded one after another in the order they were accepted, so the first is the first
 * accepted; keyed by request, it is the first decoded (docs/kafka.md, "Record keys and ordering").
 */
export async function isRepeat(store: ObjectStore, marker: string, requestId: string): Promise<boolean> {
  if (!(await store.head(marker))) {
    try {
      await store.put(marker, Buffer.from(requestId, 'utf8'), { contentType: 'text/plain', ifAbsent: true });
      return false;
    } catch (error) {
      // Another request's decode created it since the head: that one is the first.
      if (!(error instanceof ObjectStoreError && error.code === 'already-exists')) throw error;
    }
  }
  return (await readObject(store, marker)).toString('utf8') !== requestId;
}
