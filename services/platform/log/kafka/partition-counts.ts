/**
 * How many partitions the brokers list for a topic now, by metadata requests of their own (kafkajs's offsets calls
 * answer from metadata cached for 5 minutes). The look-ups asked in one turn of the event loop share one request:
 * the lag metric asks for every stage input at once, a replay for every topic it appends to. Undefined where the
 * look-up failed: no sign either way, so the caller keeps what it had.
 */
export type PartitionCounts = (topic: string) => Promise<number | undefined>;

/** `look` asks the brokers for some topics' partition counts (one metadata request). */
export function batchedPartitionCounts(look: (topics: string[]) => Promise<Map<string, number>>): PartitionCounts {
  let pending: { topics: Set<string>; answer: Promise<Map<string, number> | null> } | null = null;
  return (topic) => {
    if (!pending) {
      const topics = new Set<string>();
      const answer = new Promise<Map<string, number> | null>((resolve) => setImmediate(() => {
        pending = null;
        const asked = [...topics];
        look(asked).then(resolve, () => resolve(asked.length > 1 ? null : new Map()));
      }));
      pending = { topics, answer };
    }
    pending.topics.add(topic);
    // One topic the brokers do not know fails a request for many: each then asks alone, and only its own fails.
    return pending.answer.then((counts) => counts !== null ? counts.get(topic)
      : look([topic]).then((alone) => alone.get(topic), () => undefined));
  };
}
