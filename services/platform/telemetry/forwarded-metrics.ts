import type { Handler, Rpc } from '../threads/rpc';
import type { IngressMetrics } from './metrics';

/**
 * Metrics of a worker thread, recorded by the main thread's instruments: one exporter, one set of series,
 * the same names and attributes as when the stages ran on the main thread. Recordings are sent a turn's worth
 * at a time; observable gauges are read from the worker when the main thread's exporter collects.
 */
type Observed = 'observeLag' | 'observeCertificates';
type Recorded = Exclude<keyof IngressMetrics, Observed>;
/** Every recording method of IngressMetrics: one left out would be undefined in the worker, and a stage calling it would fail. */
const RECORDED = ['request', 'refusedByParser', 'stageRecord', 'rateLimited', 'ipNotAllowed', 'duplicate', 'mdnDelivery', 'refusalNotJournaled'] as const satisfies readonly Recorded[];
// Fails to compile when IngressMetrics gains a recording method RECORDED does not list.
const everyMethodListed: Exclude<Recorded, (typeof RECORDED)[number]> extends never ? true : never = true;
void everyMethodListed;
type Recording = [method: Recorded, args: unknown[]];

export function forwardingMetrics(rpc: () => Rpc): { metrics: IngressMetrics; handlers: Record<string, Handler> } {
  let pending: Recording[] = [];
  const flush = () => {
    const sending = pending;
    pending = [];
    rpc().notify('metrics.record', [sending]);
  };
  const record = (method: Recording[0]) => (...args: unknown[]) => {
    if (pending.length === 0) setImmediate(flush);
    pending.push([method, args]);
  };
  const readers = new Map<number, () => Promise<unknown>>();
  let lastId = 0;
  const observe = (kind: Observed) => (read: () => Promise<unknown>) => {
    const id = ++lastId;
    readers.set(id, read);
    rpc().notify('metrics.observe', [kind, id]);
    return () => {
      if (!readers.delete(id)) return;
      rpc().notify('metrics.unobserve', [id]);
    };
  };
  const metrics = {
    ...Object.fromEntries(RECORDED.map((method) => [method, record(method)])),
    observeLag: observe('observeLag'), observeCertificates: observe('observeCertificates'),
  } as IngressMetrics;
  return {
    metrics,
    handlers: { 'metrics.read': (id: number) => readers.get(id)?.() ?? [] },
  };
}

/**
 * The main thread's side: apply a worker's recordings to `metrics`, and read its gauges on collection. `close`
 * when the worker has exited: its gauges' callbacks are removed from the main thread's instruments, which
 * outlive it (a successor registers its own).
 */
export function metricsFromWorker(metrics: IngressMetrics, rpc: () => Rpc): { handlers: Record<string, Handler>; close(): void } {
  const observing = new Map<number, () => void>();
  return {
    handlers: {
      'metrics.record'(recordings: Recording[]) {
        for (const [method, args] of recordings) (metrics[method] as (...a: unknown[]) => void)(...args);
      },
      'metrics.observe'(kind: Observed, id: number) {
        observing.get(id)?.();
        observing.set(id, (metrics[kind] as (read: () => Promise<never[]>) => () => void)(() => rpc().call('metrics.read', [id])));
      },
      'metrics.unobserve'(id: number) {
        observing.get(id)?.();
        observing.delete(id);
      },
    },
    close() {
      for (const stop of observing.values()) stop();
      observing.clear();
    },
  };
}
