import type { EventLog, LogRecord } from '../../services/platform/log/event-log';

/** Reads of a topic from the beginning, for tests: the first `count` records, or everything until it is quiet. */
export async function collect(log: EventLog, topic: string, count: number, timeoutMs = 30_000): Promise<LogRecord[]> {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const out: LogRecord[] = [];
  try {
    for await (const record of log.read(topic, { start: { from: 'beginning' }, signal: abort.signal })) {
      out.push(record);
      if (out.length >= count) break;
    }
  } finally {
    clearTimeout(timer);
  }
  if (out.length < count) throw new Error(`expected ${count} record(s) on ${topic} within ${timeoutMs} ms, got ${out.length}`);
  return out;
}

/**
 * Keep reading until no new record arrives for `quietMs`; for "nothing more came" checks. The first
 * window also allows for the reader's own start (a Kafka reader joins a group first).
 */
export async function collectUntilQuiet(log: EventLog, topic: string, quietMs: number, startupMs = 3_000): Promise<LogRecord[]> {
  const abort = new AbortController();
  let timer = setTimeout(() => abort.abort(), quietMs + startupMs);
  const out: LogRecord[] = [];
  for await (const record of log.read(topic, { start: { from: 'beginning' }, signal: abort.signal })) {
    out.push(record);
    clearTimeout(timer);
    timer = setTimeout(() => abort.abort(), quietMs);
  }
  clearTimeout(timer);
  return out;
}
