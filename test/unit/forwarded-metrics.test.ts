import type { Meter } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { forwardingMetrics, metricsFromWorker } from '../../services/platform/telemetry/forwarded-metrics';
import { createIngressMetrics, type IngressMetrics } from '../../services/platform/telemetry/metrics';
import type { Rpc } from '../../services/platform/threads/rpc';

/**
 * The stage worker's metrics (forwarded-metrics.ts) reach the main thread's instruments method by method: a
 * method missing on the worker's side would be undefined there, and a stage calling it would fail after its
 * side effect (the mdn stage counts a delivery after the POST).
 */
test('every IngressMetrics method recorded in the worker is applied to the main thread\'s metrics, with its arguments', async () => {
  const applied: [string, unknown[]][] = [];
  const main = new Proxy({} as IngressMetrics, { get: (_t, method: string) => (...args: unknown[]) => { applied.push([method, args]); } });
  let handlers: Record<string, (...a: never[]) => unknown> = {};
  // The two threads' ends joined directly: a notify is the other side's handler, called at once.
  const rpc = { notify: (name: string, args: unknown[]) => { (handlers[name] as (...a: unknown[]) => unknown)(...args); }, call: async () => [] } as unknown as Rpc;
  const worker = forwardingMetrics(() => rpc);
  handlers = metricsFromWorker(main, () => rpc).handlers;

  worker.metrics.request(200, 'webhook', 0.01, 10, undefined, { method: 'POST', routed: true, spanName: 'POST /hook/{workflowId}' });
  worker.metrics.refusedByParser(400);
  worker.metrics.stageRecord('decoder', 'processed');
  worker.metrics.rateLimited('wf');
  worker.metrics.ipNotAllowed('wf');
  worker.metrics.duplicate('wf');
  worker.metrics.mdnDelivery('delivered');
  worker.metrics.refusalNotJournaled('queue-full', 2);
  await new Promise((resolve) => setImmediate(resolve));
  expect(applied).toEqual([
    ['request', [200, 'webhook', 0.01, 10, undefined, { method: 'POST', routed: true, spanName: 'POST /hook/{workflowId}' }]], ['refusedByParser', [400]], ['stageRecord', ['decoder', 'processed']], ['rateLimited', ['wf']], ['ipNotAllowed', ['wf']],
    ['duplicate', ['wf']], ['mdnDelivery', ['delivered']], ['refusalNotJournaled', ['queue-full', 2]],
  ]);
});

class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

/**
 * One stage worker's two ends over `meter`, as stage-thread.ts joins them (its own IngressMetrics on the
 * process's meter, whose instruments outlive the worker): `reads` counts the main thread's calls into this
 * worker's rpc for its gauges.
 */
function workerEnds(meter: Meter) {
  let handlers: Record<string, (...a: never[]) => unknown> = {};
  let reads = 0;
  const rpc = {
    notify: (name: string, args: unknown[]) => { (handlers[name] as (...a: unknown[]) => unknown)(...args); },
    call: async (name: string, args: unknown[]) => { reads++; return (worker.handlers[name] as (...a: unknown[]) => unknown)(...args); },
  } as unknown as Rpc;
  const worker = forwardingMetrics(() => rpc);
  const main = metricsFromWorker(createIngressMetrics(meter), () => rpc);
  handlers = main.handlers;
  return { worker: worker.metrics, main, reads: () => reads };
}

async function lagPoints(reader: TestReader) {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === 'messaging.kafka.consumer.lag').flatMap((m) => m.dataPoints.map((p) => p.value));
}

test('a worker that exited is no longer read for its gauges: a collection reads its successor once, and never the ended one', async () => {
  const reader = new TestReader();
  const meter = new MeterProvider({ readers: [reader] }).getMeter('test');
  const first = workerEnds(meter);
  first.worker.observeLag(async () => [{ stage: 'decoder', topic: 'received', lag: 5 }]);
  first.main.close(); // stage-thread.ts, on the worker's exit
  const second = workerEnds(meter);
  second.worker.observeLag(async () => [{ stage: 'decoder', topic: 'received', lag: 7 }]);
  for (let collection = 0; collection < 3; collection++) expect(await lagPoints(reader)).toEqual([7]);
  expect(first.reads()).toBe(0);
  expect(second.reads()).toBe(3);
});

test('a gauge the worker stops observing (its services stopped) is no longer read', async () => {
  const reader = new TestReader();
  const ends = workerEnds(new MeterProvider({ readers: [reader] }).getMeter('test'));
  const stop = ends.worker.observeLag(async () => [{ stage: 'decoder', topic: 'received', lag: 5 }]);
  expect(await lagPoints(reader)).toEqual([5]);
  stop();
  stop(); // a second stop is nothing
  // (The SDK goes on exporting the series' last value: only the reads tell whether the callback is gone.)
  await lagPoints(reader);
  expect(ends.reads()).toBe(1);
});
