/**
 * Progress of long CLI work on a terminal: records, rate and ETA on one stderr line, rewritten at most four
 * times a second. Off when stderr is not a TTY (piped or redirected), so scripts see only their data.
 */
export interface Progress {
  /** `done` records so far; `remaining` when known, for the ETA. */
  update(done: number, remaining: number | null): void;
  /** What the work waits for now, instead of records (a Kafka send given up at its deadline); shown on the same line. */
  waiting(what: string): void;
  /** Clears the line before something else is written to the terminal (a message of its own line), then redraws on the next update. */
  clear(): void;
  finish(): void;
}

export function createProgress(label: string, stream: NodeJS.WriteStream = process.stderr, now: () => number = Date.now): Progress {
  if (!stream.isTTY) return { update() {}, waiting() {}, clear() {}, finish() {} };
  const started = now();
  let last = 0;
  let shown = false;
  return {
    update(done, remaining) {
      const t = now();
      if (t - last < 250) return;
      last = t;
      const rate = done / Math.max((t - started) / 1000, 0.001);
      const eta = remaining !== null && rate > 0 ? ` ETA ${formatSeconds(remaining / rate)}` : '';
      stream.write(`\r${label}: ${done} records, ${Math.round(rate)}/s${eta}\u001b[K`);
      shown = true;
    },
    waiting(what) {
      stream.write(`\r${label}: ${what}\u001b[K`);
      shown = true;
    },
    clear() {
      if (shown) stream.write('\r\u001b[K');
      shown = false;
      last = 0;
    },
    finish() { if (shown) stream.write('\n'); },
  };
}

function formatSeconds(s: number): string {
  if (s < 60) return `${Math.ceil(s)}s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m}m${String(Math.ceil(s % 60)).padStart(2, '0')}s` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
