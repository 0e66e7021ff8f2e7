import type { Logger } from '../logger/logger';
import { diagLogger } from './diag-logger';
import { queryHiddenUrl } from './outgoing-url';

/**
 * Start the OpenTelemetry Node SDK when the standard OTEL_* variables ask for an exporter (traces or metrics).
 * Without them the API stays a no-op and costs nothing on the hot path. Once the SDK runs, metrics
 * (metrics.ts) go to OTEL_METRICS_EXPORTER (otlp unless it says console, prometheus or none).
 *
 * The service carries each request's trace itself, in the `traceparent` of its records (trace-context.ts), and
 * no instrumentation may take that over:
 * - Incoming HTTP is traced by the receiver (its own server span), so the http instrumentation traces outgoing
 *   calls only (Azure Blob, Cosmos DB). Its incoming side is off, not told to ignore every request: an ignored
 *   request runs with tracing suppressed, and the receiver's span came out invalid, with no trace to carry.
 * - kafkajs has no instrumentation: it injects its own producer span into every record it sends, replacing the
 *   record's trace context with one of whatever was active at the send (a transaction, a coalesced append),
 *   so on Kafka each hop began a new trace. The stages' spans already carry the messaging.* attributes.
 * (The http module is patched only when something requires it after the SDK started, as the Azure Blob and
 * Cosmos DB clients do. On the embedded backends neither happened; on the real ones both did. An asynchronous
 * MDN's POST is never traced by it: guarded-post.ts makes its own CLIENT span and suppresses the instrumentation,
 * so no trace context goes to the partner. outgoing-url.ts keeps the query out of the Blob and Cosmos calls' spans.)
 */
/** Whether the OTEL_* variables ask for an exporter of traces or metrics, i.e. whether the SDK starts. */
export function telemetryWanted(env: NodeJS.ProcessEnv): boolean {
  const asked = (name: string) => Boolean(env[name] && env[name] !== 'none');
  return env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== 'true' // as the SDK reads it
    && (asked('OTEL_EXPORTER_OTLP_ENDPOINT') || asked('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') || asked('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT') || asked('OTEL_TRACES_EXPORTER') || asked('OTEL_METRICS_EXPORTER'));
}

/**
 * Flushes what is left and stops the SDK, giving up after `withinMs`; never rejects. The exporters retry a
 * collector that refuses (about 8 s) and wait OTEL_EXPORTER_OTLP_TIMEOUT (10 s) on one that hangs: unbounded,
 * a collector that is away would push a clean stop past SHUTDOWN_GRACE_MS and into a failed exit.
 */
export type StopTelemetry = (withinMs: number) => Promise<void>;

export async function startTelemetry(env: NodeJS.ProcessEnv, logger: Logger): Promise<StopTelemetry> {
  if (!telemetryWanted(env)) return async () => undefined;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } = await import('@opentelemetry/instrumentation-http');
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? 'inbound-event-ingress',
    instrumentations: [new HttpInstrumentation({
      disableIncomingRequestInstrumentation: true,
      // Attributes the hook returns replace the instrumentation's own.
      startOutgoingSpanHook: (request) => {
        const url = queryHiddenUrl(request);
        return url === null ? {} : { 'url.full': url };
      },
    })],
  });
  // The SDK's own problems (an export refused, timed out, an endpoint it cannot parse, which start() reports and
  // then falls back to localhost) as our warn lines, rate-limited (diag-logger.ts); set before start() for that
  // reason. An operator who set OTEL_LOG_LEVEL keeps the SDK's console logger at that level instead.
  if (!env.OTEL_LOG_LEVEL) {
    const { diag, DiagLogLevel } = await import('@opentelemetry/api');
    diag.setLogger(diagLogger(logger, env), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  }
  sdk.start();
  logger.info('telemetry started', { exporter: env.OTEL_TRACES_EXPORTER ?? 'otlp' });
  return (withinMs) => boundedShutdown(() => sdk.shutdown(), withinMs, logger);
}

export async function boundedShutdown(shutdown: () => Promise<void>, withinMs: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'gave-up'>((resolve) => { timer = setTimeout(() => resolve('gave-up'), Math.max(0, withinMs)); });
  try {
    const outcome = await Promise.race([shutdown().then(() => 'flushed' as const), gaveUp]);
    if (outcome === 'gave-up') logger.warn('telemetry not flushed within the shutdown grace: the last spans and metrics are lost', { withinMs: Math.max(0, Math.floor(withinMs)) });
  } catch (error) {
    logger.warn('telemetry flush failed on shutdown: the last spans and metrics are lost', { error });
  } finally {
    clearTimeout(timer);
  }
}
