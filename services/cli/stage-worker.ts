import { parentPort, workerData } from 'node:worker_threads';
import { loadConfig } from '../platform/config/config';
import { createLogger } from '../platform/logger/logger';
import { lineBatch } from '../platform/logger/line-batch';
import type { EventLog } from '../platform/log/event-log';
import { markStopping } from '../platform/log/crash-guard';
import { threadEnded } from '../platform/files/pid-lock';
import { remoteLog } from '../platform/log/remote/remote-log';
import { rpcOver, type Handler, type Rpc } from '../platform/threads/rpc';
import { forwardingMetrics } from '../platform/telemetry/forwarded-metrics';
import { createIngressMetrics } from '../platform/telemetry/metrics';
import { startTelemetry, telemetryWanted, type StopTelemetry } from '../platform/telemetry/sdk';
import type { ReadinessCheck } from '../platform/health/admin-server';
import { openBackends, type Backends } from './backends';
import { startServices, type RunningServices, type ServiceName } from './start';
import { quietKafkajsNegativeTimeouts } from './process-warnings';

quietKafkajsNegativeTimeouts();

/**
 * The stage worker thread (stage-thread.ts starts it): the same startServices as the main thread, with the
 * stage names, so any stage wired there runs here unchanged. On the embedded log it gets the main thread's
 * log by proxy (the journal keeps its single writer); on Kafka it opens clients of its own. It opens its own
 * registry and object store: both are made to be shared with other processes, so another thread is no
 * different. Its log lines go to the main thread a turn at a time, which writes them to stdout whole.
 */
export interface StageWorkerData {
  services: ServiceName[];
  logKind: EventLog['kind'];
  watchCertificates: boolean;
  /** Worker threads of this process that ended before this one started: the locks they left are stale (pid-lock.ts). */
  endedThreads: number[];
}

const data = workerData as StageWorkerData;
for (const id of data.endedThreads) threadEnded(id);
const port = parentPort!;
let rpc: Rpc;
// process.env here is the environment the main thread's configuration was read from (stage-thread.ts).
const config = loadConfig(process.env);
const lines = lineBatch((text) => rpc.notify('worker.log', [text]));
const logger = createLogger({ level: config.logLevel, write: (line, level) => lines.write(line, level) });

const wantTelemetry = telemetryWanted(process.env);
const forwarded = forwardingMetrics(() => rpc);
const remote = data.logKind === 'embedded' && !config.kafka ? remoteLog('embedded', () => rpc) : null;

let running: RunningServices | null = null;
let backends: Backends | null = null;
let stopTelemetry: StopTelemetry = async () => undefined;
let readiness = new Map<string, ReadinessCheck>();

const handlers: Record<string, Handler> = {
  ...remote?.handlers,
  ...forwarded.handlers,
  async 'worker.start'() {
    if (wantTelemetry) {
      // Traces export from here; metrics are recorded by the main thread's instruments (forwarded-metrics.ts).
      process.env.OTEL_METRICS_EXPORTER = 'none';
      stopTelemetry = await startTelemetry(process.env, logger);
    }
    try {
      backends = await openBackends(config, logger, remote ? { log: remote.log } : {});
      running = await startServices(config, backends, data.services, logger, {
        metrics: wantTelemetry ? forwarded.metrics : createIngressMetrics(),
        watchCertificates: data.watchCertificates,
      });
    } catch (error) {
      await backends?.close();
      backends = null;
      lines.flush();
      throw error;
    }
    readiness = new Map(running.readiness.map((c) => [c.name, c]));
    return [...readiness.keys()];
  },
  // The main thread's watchdog (stage-thread.ts): answered from this thread's event loop, so only a loop that
  // does not turn leaves it unanswered.
  'worker.ping'() {
    return true;
  },
  'worker.readiness'(name: string) {
    const check = readiness.get(name);
    return check ? check.check() : `no readiness check ${name} in the stage worker`;
  },
  // Before the receiver drains on the main thread: what the stages hold is marked stopped, not crashed.
  async 'worker.stopping'() {
    await markStopping();
  },
  async 'worker.stop'(deadline: number | null) {
    await running?.stop();
    await backends?.close();
    // Half of what the grace has left: the main thread flushes its own telemetry after this one.
    await stopTelemetry(deadline === null ? config.shutdownGraceMs : (deadline - Date.now()) / 2);
    lines.flush();
  },
};
rpc = rpcOver(port, handlers);
// The main thread's watchdog counts silences from here (stage-thread.ts).
rpc.notify('worker.loaded', []);
