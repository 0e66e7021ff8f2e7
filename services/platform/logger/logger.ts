import { trace } from '@opentelemetry/api';

/**
 * Structured JSON logs, one object per line, with the active trace and span ids so an operator can
 * jump from a log line to its trace. Callers pass facts as fields, never secrets (see redact.ts).
 */
export type Level = 'debug' | 'info' | 'warn' | 'error';
export type Fields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  child(fields: Fields): Logger;
  /** Whether a level is written, so a hot path can skip building the fields of a line nobody reads. */
  enabled(level: Level): boolean;
}

const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * Longest text a field keeps. Fields carry what partners sent (a PostId, a Type, a TrackingID, a
 * Message-Id), sized by them: a 16 MiB `Type` must not become a 16 MiB log line.
 */
export const MAX_FIELD_CHARS = 2000;

/** The time of a line, formatted once per millisecond: under load many lines share one (~0.6 µs each). */
let stampMs = -1;
let stamp = '';
function now(): string {
  const ms = Date.now();
  if (ms !== stampMs) { stampMs = ms; stamp = new Date(ms).toISOString(); }
  return stamp;
}

const capped = (text: string) => (text.length > MAX_FIELD_CHARS ? `${text.slice(0, MAX_FIELD_CHARS)}… (${text.length} characters)` : text);

/** Where a line goes (without its newline); `level` lets a writer batch the lines that can wait. */
export type LineWriter = (line: string, level: Level) => void;

export function createLogger(options: { level?: Level; write?: LineWriter; fields?: Fields } = {}): Logger {
  const min = ORDER[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(line + '\n'));
  const base = options.fields ?? {};
  const emit = (level: Level, msg: string, fields?: Fields) => {
    if (ORDER[level] < min) return;
    const span = trace.getActiveSpan()?.spanContext();
    const entry: Fields = { time: now(), level, msg, ...base, ...fields };
    if (span && span.traceId !== '00000000000000000000000000000000') { entry.trace_id = span.traceId; entry.span_id = span.spanId; }
    if (entry.error instanceof Error) entry.error = { name: entry.error.name, message: capped(entry.error.message), code: (entry.error as { code?: unknown }).code };
    for (const key in entry) {
      const value = entry[key];
      if (typeof value === 'string' && value.length > MAX_FIELD_CHARS) entry[key] = capped(value);
    }
    write(JSON.stringify(entry), level);
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger({ level: options.level, write, fields: { ...base, ...fields } }),
    enabled: (level) => ORDER[level] >= min,
  };
}

export const silentLogger: Logger = createLogger({ write: () => undefined });
