import type { DiagLogger } from '@opentelemetry/api';
import type { Logger } from '../logger/logger';
import { loggableUrl } from '../net/url-allow-list';

/**
 * The OpenTelemetry SDK's own diagnostics (diag) as our JSON log lines, at warn: an exporter that cannot reach its
 * collector (refused, timed out, answered 4xx/5xx) is otherwise silent while the service runs, and spans and
 * metrics are lost unseen. Rate-limited: one line per distinct message per `everyMs`, with how many were left out
 * since, because a collector that is away fails every export. Nothing the exporter was configured with leaks: URLs
 * lose their query and credentials (loggableUrl), and the values of the OTEL_EXPORTER_OTLP_*HEADERS are redacted.
 */
export function diagLogger(logger: Logger, env: NodeJS.ProcessEnv, options: { everyMs?: number; now?: () => number } = {}): DiagLogger {
  const everyMs = options.everyMs ?? 60_000;
  const now = options.now ?? Date.now;
  const secrets = headerValues(env);
  const last = new Map<string, { at: number; leftOut: number }>();
  const report = (level: string) => (message: string, ...args: unknown[]) => {
    const detail = scrub([describe(message), ...args.map(describe)].filter(Boolean).join(' '), secrets).slice(0, 1000);
    // Distinct by its words, not its numbers: "Dropped 4600 spans", "… on ended Span {<trace id>}" vary per call.
    const key = detail.replace(/\b[0-9a-f]{16,32}\b/gi, '#').replace(/\d+/g, '#');
    const seen = last.get(key);
    const at = now();
    if (seen && at - seen.at < everyMs) { seen.leftOut++; return; }
    // Distinct problems are few; a flood of others drops the oldest one's limit, not every one's.
    if (!seen && last.size >= 100) last.delete(last.keys().next().value!);
    last.delete(key);
    last.set(key, { at, leftOut: 0 });
    logger.warn('OpenTelemetry SDK reported a problem: spans or metrics may be lost', { diagLevel: level, detail, ...(seen ? { leftOutSinceLast: seen.leftOut } : {}) });
  };
  const ignore = () => undefined;
  return { error: report('error'), warn: report('warn'), info: ignore, debug: ignore, verbose: ignore };
}

/** An exception the SDK stringified (loggingErrorHandler: its properties as JSON, stack included): its message and code, without the stack, which differs with nothing to tell. */
function describe(value: unknown): string {
  if (value instanceof Error) return `${value.message}${(value as { code?: unknown }).code ? ` (${String((value as { code?: unknown }).code)})` : ''}`;
  if (typeof value !== 'string') { try { return JSON.stringify(value) ?? ''; } catch { return String(value); } }
  if (value.startsWith('{')) {
    try {
      const parsed = JSON.parse(value) as { message?: unknown; code?: unknown };
      if (typeof parsed.message === 'string') return `${parsed.message}${parsed.code ? ` (${String(parsed.code)})` : ''}`;
    } catch { /* not JSON after all: the text as it is */ }
  }
  return value;
}

function headerValues(env: NodeJS.ProcessEnv): string[] {
  const names = ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'OTEL_EXPORTER_OTLP_METRICS_HEADERS', 'OTEL_EXPORTER_OTLP_LOGS_HEADERS'];
  const values: string[] = [];
  for (const name of names) {
    for (const pair of (env[name] ?? '').split(',')) {
      const value = pair.slice(pair.indexOf('=') + 1).trim();
      // A value too short to be a credential would only garble the line where its characters recur.
      if (pair.includes('=') && value.length >= 4) values.push(value, decodeURIComponentSafe(value));
    }
  }
  return [...new Set(values)].sort((a, b) => b.length - a.length);
}

function decodeURIComponentSafe(text: string): string {
  try { return decodeURIComponent(text); } catch { return text; }
}

function scrub(text: string, secrets: string[]): string {
  let out = text.replace(/\bhttps?:\/\/[^\s"'<>]+/gi, (url) => loggableUrl(url));
  for (const secret of secrets) out = out.split(secret).join('[redacted]');
  return out;
}
