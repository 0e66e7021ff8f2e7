import type { LogRecord } from '../platform/log/event-log';
import { recordIdentity } from '../platform/log/replay-marking';

/**
 * Holds a stage's records until their due time without a timer outside the log and without a busy loop.
 * A retry topic has one fixed delay, so its records are in due-time order: only the head of a partition
 * ever waits. The first time a record is not due, the gate throws NotDue: the adapter commits what the
 * batch did before it (so a delivered MDN is never resent because a later record waits) and comes back to
 * this record after its short back-off; the second time, the gate sleeps until the due time. `stop()` ends
 * every sleep at once (the record is then read again after a restart).
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

export function dueGate(now: () => number = Date.now): DueGate {
  const stopping = new AbortController();
  const held = new Set<string>();
  return {
    async wait(record, dueAt) {
      const id = recordIdentity(record);
      if (stopping.signal.aborted) throw new Stopping();
      if (dueAt <= now()) { held.delete(id); return; }
      if (!held.has(id)) { held.add(id); throw new NotDue(dueAt); }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(0, dueAt - now()));
        stopping.signal.addEventListener('abort', done, { once: true });
        function done() { clearTimeout(timer); stopping.signal.removeEventListener('abort', done); resolve(); }
      });
      if (stopping.signal.aborted) throw new Stopping();
      held.delete(id);
    },
    stop: () => stopping.abort(),
  };
}
