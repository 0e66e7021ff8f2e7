import type { Headers, LogRecord } from './event-log';

/**
 * How a replayed record is told from a new one. `ingress replay` and `ingress dead-letters replay` append a
 * copy of the original record to its stage's input topic with the header `ingress-replay-of` naming the
 * original's position, `<topic>/<partition>/<offset>`. Each stage carries the header on to what it produces,
 * and the dispatcher writes it into ExecutionRequested.replayOf. A replay of a replay keeps the first
 * original's identity, so replayOf always points at a record that was not itself a replay.
 */
export const REPLAY_OF_HEADER = 'ingress-replay-of';

export function recordIdentity(record: Pick<LogRecord, 'topic' | 'partition' | 'offset'>): string {
  return `${record.topic}/${record.partition}/${record.offset}`;
}

/** The original's identity when this record is a replay, else null. */
export function replayOf(headers: Headers): string | null {
  return headers[REPLAY_OF_HEADER] ?? null;
}

/** The headers of a replayed copy of `record`. */
export function replayHeaders(record: Pick<LogRecord, 'topic' | 'partition' | 'offset' | 'headers'>): Headers {
  return { ...record.headers, [REPLAY_OF_HEADER]: replayOf(record.headers) ?? recordIdentity(record) };
}

/** What a stage adds to its output headers so that a replay stays marked downstream. */
export function carryReplayMark(input: Headers, output: Headers): Headers {
  const original = replayOf(input);
  return original === null ? output : { ...output, [REPLAY_OF_HEADER]: original };
}
