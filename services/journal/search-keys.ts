import type { Decoded, DecodedItem, TriggerKind } from '../platform/avro/records';
import { journalKey } from '../platform/registry/journal';
import { EnvelopeError, readWarehousePost } from '../triggers/warehouse/envelope';

/**
 * The partner identifiers a decoded request can be found by, per trigger kind: where each lives in the items
 * the trigger's decode made. A warehouse post's PostId is in the post as sent (read as the trigger reads it,
 * so a long numeric id keeps every digit); a logistics Message's TrackingID is the item's `trackingId`. An
 * AS2 Message-Id is not here: the received record carries it (Received.as2.messageId).
 */
const KEYS_OF_ITEM: Partial<Record<TriggerKind, (item: DecodedItem) => string[]>> = {
  warehouse(item) {
    try {
      const { postId } = readWarehousePost(Buffer.from(item.value, 'utf8'));
      return postId === null ? [] : [journalKey('postId', postId)];
    } catch (error) {
      if (error instanceof EnvelopeError) return [];
      throw error;
    }
  },
  logistics(item) {
    const value = parseObject(item.value);
    return typeof value?.trackingId === 'string' && value.trackingId !== '' ? [journalKey('trackingId', value.trackingId)] : [];
  },
};

export function searchKeysOf(decoded: Decoded): string[] {
  const of = KEYS_OF_ITEM[decoded.triggerKind];
  return of ? [...new Set(decoded.items.flatMap(of))] : [];
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? value as Record<string, unknown> : null;
  } catch {
    return null;
  }
}
