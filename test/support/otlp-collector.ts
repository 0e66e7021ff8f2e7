import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for an OpenTelemetry collector: it takes OTLP/HTTP with JSON bodies (a service started with
 * OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json) and keeps the spans, so that a test reads what a service
 * process really exported, from its SDK, without parsing its stdout.
 */
export interface CollectedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  /** OTLP's SpanKind number: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
  attributes: Record<string, string | number | boolean>;
}

export interface OtlpCollector {
  /** For OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. */
  tracesUrl: string;
  spans(): CollectedSpan[];
  close(): Promise<void>;
}

interface OtlpValue { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number }
interface OtlpSpan { traceId: string; spanId: string; parentSpanId?: string; name: string; kind?: number; status?: { code?: number }; attributes?: { key: string; value: OtlpValue }[] }
interface OtlpTraces { resourceSpans?: { scopeSpans?: { spans?: OtlpSpan[] }[] }[] }

const valueOf = (v: OtlpValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue ?? v.doubleValue ?? '');

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: CollectedSpan[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpTraces;
        for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) for (const s of scope.spans ?? []) {
          spans.push({
            traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || null, name: s.name, kind: s.kind ?? 0, status: s.status?.code ?? 0,
            attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, valueOf(a.value)])),
          });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    tracesUrl: `http://127.0.0.1:${port}/v1/traces`,
    spans: () => [...spans],
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
