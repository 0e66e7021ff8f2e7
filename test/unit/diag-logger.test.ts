import { createLogger } from '../../services/platform/logger/logger';
import { diagLogger } from '../../services/platform/telemetry/diag-logger';

/** The SDK's diagnostics as our warn lines (a service process with a refused collector: test/e2e/telemetry-diag.test.ts). */
test('one line per distinct problem per minute, saying how many were left out; URLs lose their query, header values are redacted', () => {
  const lines: Record<string, unknown>[] = [];
  let now = 0;
  const diag = diagLogger(createLogger({ write: (line) => lines.push(JSON.parse(line)) }), { OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'authorization=Bearer%20T0KEN,x=1' }, { now: () => now });
  const refused = JSON.stringify({ stack: 'Error: connect ECONNREFUSED\n    at x', message: 'connect ECONNREFUSED 127.0.0.1:4318', code: 'ECONNREFUSED' });
  diag.error(refused);
  now = 30_000; diag.error(refused); diag.error(refused);
  diag.warn('export to https://user:pw@collector.example/v1/metrics?token=abc failed with Bearer T0KEN');
  diag.info('chatter');
  now = 61_000; diag.error(refused);
  expect(lines.map((l) => [l.diagLevel, l.detail, l.leftOutSinceLast])).toEqual([
    ['error', 'connect ECONNREFUSED 127.0.0.1:4318 (ECONNREFUSED)', undefined],
    ['warn', 'export to https://collector.example/v1/metrics?… failed with [redacted]', undefined],
    ['error', 'connect ECONNREFUSED 127.0.0.1:4318 (ECONNREFUSED)', 2],
  ]);
});

test('messages that differ only in their numbers or ids are one problem (found by review: a line per export cycle)', () => {
  const lines: Record<string, unknown>[] = [];
  let now = 0;
  const diag = diagLogger(createLogger({ write: (line) => lines.push(JSON.parse(line)) }), {}, { now: () => now });
  for (let n = 1; n <= 50; n++) { now = n * 100; diag.warn(`Dropped ${n * 100} spans because maxQueueSize reached`); }
  diag.warn('Cannot execute the operation on ended Span {traceId: 0af7651916cd43dd8448eb211c80319c, spanId: b7ad6b7169203331}');
  diag.warn('Cannot execute the operation on ended Span {traceId: 1234567890abcdef1234567890abcdef, spanId: 1111111111111111}');
  now = 70_000; diag.warn('Dropped 9900 spans because maxQueueSize reached');
  expect(lines.map((l) => [l.detail, l.leftOutSinceLast])).toEqual([
    ['Dropped 100 spans because maxQueueSize reached', undefined],
    ['Cannot execute the operation on ended Span {traceId: 0af7651916cd43dd8448eb211c80319c, spanId: b7ad6b7169203331}', undefined],
    ['Dropped 9900 spans because maxQueueSize reached', 49],
  ]);
});
