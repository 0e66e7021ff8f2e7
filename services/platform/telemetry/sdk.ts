import type { Logger } from '../logger/logger';

/**
 * Start the OpenTelemetry Node SDK when the standard OTEL_* variables ask for an exporter (traces or metrics).
 * Without them the API stays a no-op and costs nothing on the hot path. Once the SDK runs, metrics
 * (metrics.ts) go to OTEL_METRICS_EXPORTER (otlp unless it says console, prometheus or none). Incoming HTTP is traced by the
 * receiver itself (its own server span), so the http instrumentation only traces outgoing calls
 * (Azure Blob, Cosmos DB); kafkajs is traced by its instrumentation.
 */
/** Whether the OTEL_* variables ask for an exporter of traces or metrics, i.e. whether the SDK starts. */
export function telemetryWanted(env: NodeJS.ProcessEnv): boolean {
  const asked = (name: string) => Boolean(env[name] && env[name] !== 'none');
  return env.OTEL_SDK_DISABLED !== 'true'
    && (asked('OTEL_EXPORTER_OTLP_ENDPOINT') || asked('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') || asked('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT') || asked('OTEL_TRACES_EXPORTER') || asked('OTEL_METRICS_EXPORTER'));
}

export async function startTelemetry(env: NodeJS.ProcessEnv, logger: Logger): Promise<() => Promise<void>> {
  if (!telemetryWanted(env)) return async () => undefined;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } = await import('@opentelemetry/instrumentation-http');
  const { KafkaJsInstrumentation } = await import('@opentelemetry/instrumentation-kafkajs');
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? 'inbound-event-ingress',
    instrumentations: [new HttpInstrumentation({ ignoreIncomingRequestHook: () => true }), new KafkaJsInstrumentation()],
  });
  sdk.start();
  logger.info('telemetry started', { exporter: env.OTEL_TRACES_EXPORTER ?? 'otlp' });
  return () => sdk.shutdown();
}
