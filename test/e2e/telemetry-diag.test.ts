import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { freePort } from '../support/free-port';

/**
 * An exporter whose collector refuses is not silent while the service runs: in a process of the built service with
 * its SDK (dist/), the SDK's diagnostics become our JSON warn lines, which never show the endpoint's query or the
 * exporter's header values.
 */
const dist = path.resolve(__dirname, '../../dist/services/platform');
const script = `
const { createLogger } = require(${JSON.stringify(`${dist}/logger/logger`)});
const { startTelemetry } = require(${JSON.stringify(`${dist}/telemetry/sdk`)});
const { trace } = require('@opentelemetry/api');
(async () => {
  const stop = await startTelemetry(process.env, createLogger({ level: 'info' }));
  for (let i = 0; i < 40; i++) { trace.getTracer('t').startSpan('s' + i).end(); await new Promise((r) => setTimeout(r, 100)); }
  await stop(1000);
})();
`;

test('a refused OTLP endpoint: a warn line while running, without the query or header values of the configuration', async () => {
  const port = await freePort(); // nothing listens there
  const child = spawn(process.execPath, ['-e', script], {
    cwd: path.resolve(__dirname, '../..'),
    env: {
      PATH: process.env.PATH, OTEL_TRACES_EXPORTER: 'otlp', OTEL_METRICS_EXPORTER: 'none', OTEL_LOGS_EXPORTER: 'none',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${port}/v1/traces?api_key=QUERY-SECRET`, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=HEADER-SECRET', OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
    },
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
  child.stderr.on('data', (c: Buffer) => { err += c.toString(); });
  await new Promise((resolve) => child.on('exit', resolve));
  const lines = out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const problems = lines.filter((l) => l.msg === 'OpenTelemetry SDK reported a problem: spans or metrics may be lost');
  expect({ problems: problems.length > 0, err }).toEqual({ problems: true, err: '' });
  expect(problems[0]).toMatchObject({ level: 'warn', detail: expect.stringContaining('ECONNREFUSED') });
  // Rate-limited: the same refusal again within the minute is not another line.
  expect(new Set(problems.map((p) => p.detail)).size).toBe(problems.length);
  expect(out + err).not.toMatch(/QUERY-SECRET|HEADER-SECRET/);
}, 60_000);
