import type { Logger } from '../logger/logger';

/**
 * Start the OpenTelemetry Node SDK when the standard OTEL_* variables ask for an exporter. Without
 * them the API stays a no-op and costs nothing on the hot path. Incoming HTTP is traced by the
 * receiver itself (its own server span), so the http instrumentation only traces outgoing calls
 * (Azure Blob, Cosmos DB); kafkajs is traced by its instrumentation.
 */
export async function startTelemetry(env: NodeJS.ProcessEnv, logger: Logger): Promise<() => Promise<void>> {
  const wanted = env.OTEL_SDK_DISABLED !== 'true' && Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || (env.OTEL_TRACES_EXPORTER && env.OTEL_TRACES_EXPORTER !== 'none'));
  if (!wanted) return async () => undefined;
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
