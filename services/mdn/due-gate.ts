import type { LogRecord } from '../platform/log/event-log';
import { recordIdentity } from '../platform/log/replay-marking';

/**
 * Holds a stage's records until their due time without a timer outside the log and without a busy loop.
 * A retry topic has one fixed delay, so its records are in due-time order: only the head of a partition
 * ever waits. The first time a record is not due, the gate throws NotDue: the adapter commits what the
 * batch did before it (so a delivered MDN is never resent because a later record waits) and comes back to
 * this record after its short back-off; the second time, the gate sleeps until the due time, at most
 * MAX_DUE_SLEEP_MS at a time (then it throws NotDue again). `stop()` ends every sleep at once (the record is
 * then read again after a restart).
 */
export class NotDue extends Error {
  constructor(readonly dueAt: number) {
    super(`not due before ${new Date(dueAt).toISOString()}`);
    this.name = 'NotDue';
  }
}

export class Stopping extends Error {
  constructor() {
    super('the stage is stopping');
    this.name = 'Stopping';
  }
}

export interface DueGate {
  /** Resolves when the record is due; throws NotDue or Stopping. */
  wait(record: LogRecord, dueAt: number): Promise<void>;
  stop(): void;
}

/** The longest one sleep lasts: well inside a Kafka session and rebalance timeout. */
export const MAX_DUE_SLEEP_MS = 2_000;

export function dueGate(now: () => number = Date.now, maxSleepMs = MAX_DUE_SLEEP_MS): DueGate {
  const stopping = new AbortController();
  const held = new Set<string>();
  return {
    async wait(record, dueAt) {
      const id = recordIdentity(record);
      if (stopping.signal.aborted) throw new Stopping();
      if (dueAt <= now()) { held.delete(id); return; }
      if (!held.has(id)) { held.add(id); throw new NotDue(dueAt); }
      // A bounded sleep, then the record is handed back again: a long wait inside a batch would hold the
      // member's other partitions and miss a rebalance (the group would expel it, and a new owner deliver the
      // MDN while this one still meant to).
      const sleepMs = Math.min(Math.max(0, dueAt - now()), maxSleepMs);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, sleepMs);
        stopping.signal.addEventListener('abort', done, { once: true });
        function done() { clearTimeout(timer); stopping.signal.removeEventListener('abort', done); resolve(); }
      });
      if (stopping.signal.aborted) throw new Stopping();
      if (dueAt > now()) throw new NotDue(dueAt);
      held.delete(id);
    },
    stop: () => stopping.abort(),
  };
}
