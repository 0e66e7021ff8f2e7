import type { AvroCodec } from '../platform/avro/codec';
import type { Refused } from '../platform/avro/records';
import type { EventLog } from '../platform/log/event-log';
import type { Logger } from '../platform/logger/logger';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import { createRateLimiter, type RateLimit } from '../triggers/rate-limiter';

/**
 * Refused requests for the request journal (docs/request-journal.md): a request answered without being
 * accepted (401, 403, 413, 429, 503…) has no received record, so the receiver appends a small `Refused` record
 * to a topic of its own, after the answer and never in its way.
 *
 * Bounded three ways, because refusals are what an attacker controls:
 * - only requests to an existing, active workflow with a trigger are noted (the receiver decides), so the
 *   buckets below are at most one per workflow;
 * - each workflow may note `perMinute` a minute, with a burst of as many (a token bucket);
 * - at most `maxPending` records wait, and one append is in flight at a time: the refusals of a flood share
 *   one write instead of competing with the accepts for the log.
 * What is left out is counted (`ingress.journal.refusals_not_journaled`, by reason), never waited for.
 */
export interface RefusalJournal {
  /** Queue a refusal; returns at once and never throws. */
  note(refusal: Refused): void;
  /** Wait, up to `graceMs` (5 s), for what is queued or in flight to be appended (or to fail); later notes are dropped. */
  close(graceMs?: number): Promise<void>;
}

export interface RefusalJournalDeps {
  log: Pick<EventLog, 'append'>;
  topic: string;
  codec: AvroCodec;
  logger: Logger;
  metrics: Pick<IngressMetrics, 'refusalNotJournaled'>;
  /** Refusals noted per workflow and minute; 0 notes none. */
  perMinute: number;
  maxPending?: number;
  /** The limiter's clock, for tests. */
  now?: () => number;
}

export const DEFAULT_MAX_PENDING_REFUSALS = 1000;

export function createRefusalJournal(deps: RefusalJournalDeps): RefusalJournal {
  const maxPending = deps.maxPending ?? DEFAULT_MAX_PENDING_REFUSALS;
  const limiter = createRateLimiter({ maxBuckets: 10_000, ...(deps.now ? { now: deps.now } : {}) });
  const limit: RateLimit = { perSecond: deps.perMinute / 60, burst: Math.max(1, deps.perMinute) };
  let pending: Refused[] = [];
  let inFlight: Promise<void> | null = null;
  let closed = false;
  let warnedAt = 0;

  function flush(): void {
    if (inFlight || pending.length === 0) return;
    const batch = pending;
    pending = [];
    inFlight = (async () => {
      try {
        await deps.log.append(batch.map((r) => ({ topic: deps.topic, key: r.workflowId, value: deps.codec.encode('Refused', r) })));
      } catch (error) {
        deps.metrics.refusalNotJournaled('append-failed', batch.length);
        // One line a minute at most: a log that refuses appends is already being reported by the accepts.
        if (Date.now() - warnedAt > 60_000) { warnedAt = Date.now(); deps.logger.warn('refused requests could not be journaled', { count: batch.length, error }); }
      } finally {
        inFlight = null;
      }
      if (!closed) flush();
    })();
  }

  return {
    note(refusal) {
      if (closed || deps.perMinute === 0) return;
      if (!limiter.take(refusal.workflowId, limit).ok) { deps.metrics.refusalNotJournaled('rate-limited'); return; }
      if (pending.length >= maxPending) { deps.metrics.refusalNotJournaled('queue-full'); return; }
      pending.push(refusal);
      // After this turn's answers are written: the append never sits between a request and its answer.
      if (pending.length === 1 && !inFlight) setImmediate(flush);
    },
    async close(graceMs = 5_000) {
      // Bounded: a log that hangs (a broker away) must not hold the shutdown past its grace.
      const drained = (async () => {
        while (inFlight || pending.length) {
          if (!inFlight) flush();
          await inFlight;
        }
      })();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([drained, new Promise<void>((resolve) => { timer = setTimeout(resolve, graceMs); timer.unref(); })]);
      clearTimeout(timer);
      closed = true;
      if (pending.length) { deps.metrics.refusalNotJournaled('append-failed', pending.length); pending = []; }
    },
  };
}
