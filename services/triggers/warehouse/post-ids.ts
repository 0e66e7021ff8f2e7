import { createHash } from 'node:crypto';
import type { ObjectStore } from '../../platform/store/object-store';

/**
 * Which request first carried a PostId, per workflow, kept in the object store. A post is a duplicate
 * when an earlier request carried its PostId; the first request stays the original when it is decoded
 * again (a retry or a replay), so the flag is the same every time a record is decoded.
 *
 * Races cannot occur in normal operation: records are keyed by workflow id, so one workflow's posts
 * are decoded one after another on one partition.
 */
export interface PostIdLedger {
  /** True when another request carried this PostId before; records this request as first otherwise. */
  isDuplicate(workflowId: string, postId: string, requestId: string): Promise<boolean>;
}

export function postIdLedger(store: ObjectStore): PostIdLedger {
  return {
    async isDuplicate(workflowId, postId, requestId) {
      const path = `warehouse/${workflowId}/post-ids/${createHash('sha256').update(postId, 'utf8').digest('hex')}`;
      if (await store.head(path)) {
        const chunks: Buffer[] = [];
        for await (const chunk of await store.get(path)) chunks.push(chunk as Buffer);
        return Buffer.concat(chunks).toString('utf8') !== requestId;
      }
      await store.put(path, Buffer.from(requestId, 'utf8'), { contentType: 'text/plain' });
      return false;
    },
  };
}
