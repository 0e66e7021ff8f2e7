import { forwardingMetrics, metricsFromWorker } from '../../services/platform/telemetry/forwarded-metrics';
import type { IngressMetrics } from '../../services/platform/telemetry/metrics';
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
  handlers = metricsFromWorker(main, () => rpc);

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
