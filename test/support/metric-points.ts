import { metrics as metricsApi } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';

/** A pull reader: the test collects when it wants to look, nothing is exported. */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

export type Point = { attributes: Record<string, unknown>; value: unknown };

/**
 * Makes the OpenTelemetry SDK's meter provider the global one (call it before the service creates its
 * instruments), and returns what reads the data points of one metric by name.
 */
export function readGlobalMetrics(): (name: string) => Promise<Point[]> {
  const reader = new TestReader();
  metricsApi.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  return async (name) => {
    const { resourceMetrics } = await reader.collect();
    return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === name).flatMap((m) => m.dataPoints as Point[]);
  };
}
