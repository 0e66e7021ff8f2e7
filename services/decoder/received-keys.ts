import type { EventLog, LogRecord } from '../platform/log/event-log';
import { IDEMPOTENCY_HEADER } from '../platform/log/record-keys';
import type { Logger } from '../platform/logger/logger';
import type { KeyedAccept, LedgerDeps } from './idempotency-ledger';

/** How long one read-back of the received topic may take before its batch is retried (decoder.ts prepareLedger). */
export const READ_BACK_PATIENCE_MS = 120_000;

/**
 * How long a read-back cut short is kept for its retry, which comes within the stage's back-off (30 s at most):
 * one whose partition went to another member (a rebalance) is dropped at the next read-back after that.
 */
const UNFINISHED_KEPT_MS = 10 * 60_000;

export interface ReceivedKeysDeps {
  log: Pick<EventLog, 'read' | 'offsetsForTime'>;
  /** The received topic. */
  topic: string;
  logger: Logger;
  /** The keyed accept a received record is, or null; throws for a record that does not decode. */
  acceptOf(record: LogRecord): KeyedAccept | null;
  patienceMs?: number;
}

/**
 * The idempotency ledger's read-back (idempotency-ledger.ts): the keyed accepts of one partition of the received
 * topic, from an offset or a time up to an offset. A read-back that runs out of time throws, and its batch is
 * retried; what it read is kept, per partition, and the retry of the same read-back goes on from where it stopped.
 * Started again from its beginning each time, one that needs longer than its patience (about a million keyed
 * records in a partition's lookback, at 0.7 s per 6,000) would never finish, and would hold its partition for ever.
 */
export function receivedKeysReader(deps: ReceivedKeysDeps): LedgerDeps['readBack'] {
  const patienceMs = deps.patienceMs ?? READ_BACK_PATIENCE_MS;
  const unfinished = new Map<number, { start: bigint; to: bigint; next: bigint; accepts: KeyedAccept[]; at: number }>();
  return async (partition, from, to) => {
    for (const [other, cut] of unfinished) if (Date.now() - cut.at > UNFINISHED_KEPT_MS) unfinished.delete(other);
    const start = 'offset' in from ? from.offset
      : BigInt((await deps.log.offsetsForTime(deps.topic, from.time)).find((p) => p.partition === partition)?.offset ?? String(to));
    const earlier = unfinished.get(partition);
    unfinished.delete(partition);
    // The same read-back again (its record retried): the same start and end. Any other starts afresh.
    const resumed = earlier !== undefined && earlier.start === start && earlier.to === to ? earlier : null;
    const accepts: KeyedAccept[] = resumed?.accepts ?? [];
    if (start >= to) return accepts;
    const began = Date.now();
    let last = (resumed?.next ?? start) - 1n;
    const signal = AbortSignal.timeout(patienceMs);
    try {
      if (last < to - 1n) {
        for await (const record of deps.log.read(deps.topic, { start: { from: 'offset', offset: String(last + 1n), partition }, signal })) {
          if (record.partition !== partition) continue;
          // Past the end: read through, whatever offsets were missing before it (transaction markers, on Kafka).
          if (BigInt(record.offset) >= to) { last = to - 1n; break; }
          last = BigInt(record.offset);
          if (record.headers[IDEMPOTENCY_HEADER] !== undefined) {
            try {
              const accept = deps.acceptOf(record);
              if (accept) accepts.push(accept);
            } catch {
              // A record that does not decode was dead-lettered unobserved when it was first read: skipped here too.
            }
          }
          if (last === to - 1n) break;
        }
      }
    } catch (error) {
      // Out of patience: said below, with where it stopped, rather than as the read's abort.
      if (!signal.aborted) throw error;
    } finally {
      if (last < to - 1n) unfinished.set(partition, { start, to, next: last + 1n, accepts, at: Date.now() });
    }
    if (last < to - 1n) throw new Error(`reading back partition ${partition} of ${deps.topic} for idempotency keys stopped at offset ${last}, before ${to - 1n} (its retry goes on from there)`);
    deps.logger.info('idempotency keys read back from the received topic', {
      partition, from: String(start), to: String(to), keyed: accepts.length, ms: Date.now() - began, ...(resumed ? { resumedFrom: String(resumed.next) } : {}),
    });
    return accepts;
  };
}
