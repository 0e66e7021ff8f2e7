import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ConfigError, type Config } from '../platform/config/config';
import type { ReadinessCheck } from '../platform/health/admin-server';
import { serveLog } from '../platform/log/remote/log-host';
import type { Logger } from '../platform/logger/logger';
import { metricsFromWorker } from '../platform/telemetry/forwarded-metrics';
import { createIngressMetrics } from '../platform/telemetry/metrics';
import { rpcOver, type Rpc } from '../platform/threads/rpc';
import type { Backends } from './backends';
import { startServices, type RunningServices, type ServiceName } from './start';
import { endedThreadIds, threadEnded } from '../platform/files/pid-lock';
import type { StageWorkerData } from './stage-worker';

/**
 * `ingress start` with a receiver and stages: the stages run in one worker thread, so that the CPU they
 * spend per record never delays an accept on the receiver's event loop (docs/architecture.md, "Threads").
 * One thread, not one per stage: on the two cores the service is sized for, the receiver's thread and one
 * stage thread fill them; more threads would only contend. STAGE_THREADS=0 runs everything on this thread.
 * `env` is what `config` was read from: the worker reads its configuration from it too.
 */
export async function startServicesInThreads(config: Config, env: NodeJS.ProcessEnv, backends: Backends, services: readonly ServiceName[], logger: Logger): Promise<RunningServices> {
  const stages = services.filter((s) => s !== 'receiver');
  // Without a receiver there is no accept to protect; without stages nothing to move.
  if (config.stageThreads === 0 || !services.includes('receiver') || stages.length === 0) return startServices(config, backends, services, logger);
  // Stages first, as startServices starts them before the receiver listens.
  const thread = await superviseStageThread(() => startStageThread(backends, env, stages, logger, config.stageWatchdogMs), logger);
  let main: RunningServices;
  try {
    main = await startServices(config, backends, services.filter((s) => s === 'receiver'), logger);
  } catch (error) {
    await thread.stop().catch(() => undefined);
    throw error;
  }
  const mainChecks = new Set(main.readiness.map((c) => c.name));
  return {
    port: main.port,
    readiness: [...main.readiness, ...thread.readiness.filter((c) => !mainChecks.has(c.name))],
    failed: thread.failed,
    async stop(receiverGraceMs, deadline) {
      // Told at once, while the receiver drains (not before it closes: it takes no new connection from this
      // instant): a grace that runs out meanwhile is still a stop, not a crash.
      const told = thread.stopping();
      // The receiver stops first, so everything answered 200 is in the log before the stages stop.
      await main.stop(receiverGraceMs);
      await told;
      await thread.stop(deadline);
    },
  };
}

export interface StageThread {
  /** The worker's own readiness checks (each stage by name), asked of it when /readyz is. */
  readiness: ReadinessCheck[];
  /** Settles with the error when the worker exits without being asked to stop. */
  failed: Promise<Error>;
  /** Settles once the worker has exited and, on the embedded log, this thread has stopped serving its stages. */
  closed: Promise<void>;
  /** Stop the stages (they commit), close the worker's backends, and let the worker end, by `deadline` (epoch ms) if given. */
  stop(deadline?: number): Promise<void>;
  /** The process is stopping on request: the worker's crash marks say so (crash-guard.ts markStopping). Never throws. */
  stopping(): Promise<void>;
}

/** How often the main thread asks the worker whether its event loop still turns (STAGE_WATCHDOG_MS bounds the silence). */
const PING_EVERY_MS = 1_000;
/** How long a new worker may take to load its modules before the watchdog takes it for hung. */
const LOADING_SILENCE_MS = 120_000;
/** How long a readiness question waits for the worker: /readyz answers within 2 s, and a question it stopped waiting for is forgotten. */
const READINESS_WAIT_MS = 2_000;

/**
 * `watchdogMs`: a worker whose event loop does not answer a ping for this long (a handler in an endless loop, a
 * record that takes a library into one) is terminated and handled as a worker that exited (superviseStageThread
 * starts another), and the crash marks (platform/log/crash-guard.ts) narrow the record down. Without it the
 * receiver went on answering 200 with nothing processed, /healthz up, and not a line logged.
 */
export async function startStageThread(backends: Backends, env: NodeJS.ProcessEnv, services: ServiceName[], logger: Logger, watchdogMs: number): Promise<StageThread> {
  const entry = path.join(__dirname, 'stage-worker.js');
  const data: StageWorkerData = { services, logKind: backends.log.kind, watchCertificates: false, endedThreads: endedThreadIds() };
  // The worker's process.env is the environment the main thread's configuration came from, which need not be
  // this process's (main() takes one): both threads then read the same configuration.
  const workerEnv = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined));
  const worker = new Worker(entry, { workerData: data, env: workerEnv, name: 'ingress-stages' });
  // Read now: once the worker has exited, worker.threadId is -1.
  const workerThreadId = worker.threadId;
  let rpc: Rpc | null = null;
  const channel = () => rpc!;
  // On Kafka the worker opens its own clients; the embedded journal has one writer, this thread.
  const host = backends.log.kind === 'embedded' ? serveLog(backends.log, channel) : null;
  const forwarded = metricsFromWorker(createIngressMetrics(), channel);
  rpc = rpcOver(worker, {
    ...host?.handlers,
    ...forwarded.handlers,
    // Whole lines, a turn's worth at a time: stdout is synchronous on pipes and files, so none is lost on exit.
    'worker.log': (text: string) => { process.stdout.write(text); },
    // Its modules are loaded and its event loop turns: from now on, a silence is the worker's (the watchdog below).
    'worker.loaded': () => { loaded = true; answeredAt = Date.now(); },
  });

  let stopping = false;
  let gone = false;
  let lastError: Error | null = null;
  let watchdog: NodeJS.Timeout | undefined;
  let reportFailure: (error: Error) => void = () => undefined;
  const failed = new Promise<Error>((resolve) => { reportFailure = resolve; });
  let hostClosed: Promise<void> = Promise.resolve();
  const exited = new Promise<number>((resolve) => {
    worker.on('error', (error) => { lastError = error; });
    worker.once('exit', (code) => {
      clearInterval(watchdog);
      // Locks it held are stale now, for this thread and for the workers started after it.
      threadEnded(workerThreadId);
      const error = new Error(`the stage worker thread exited with code ${code}${lastError ? `: ${lastError.message}` : ''}`);
      gone = true;
      rpc!.close(error);
      // Its gauges leave with it: the instruments are the process's, and each successor registers its own.
      forwarded.close();
      // The batches it held are not committed: the journal still has their records, read again on restart.
      if (host) hostClosed = host.close().catch(() => undefined);
      if (!stopping) {
        logger.error('stage worker thread exited unexpectedly', { code, error: lastError ?? undefined });
        reportFailure(error);
      }
      resolve(code);
    });
  });

  // Armed before the worker starts: its stages may be handed records (those its predecessor held) before its
  // start is answered, and a record that hangs it then must be found as well. Until it has loaded its modules
  // (which on a busy machine takes seconds of one core, and answers no ping), the silence allowed is
  // LOADING_SILENCE_MS: no record reaches it before, since it takes none before its rpc is up.
  let loaded = false;
  let answeredAt = Date.now();
  let tickedAt = answeredAt;
  let asking = false;
  watchdog = setInterval(() => {
    if (stopping || gone) return;
    const now = Date.now();
    // This thread did not tick either (the process was paused, a VM frozen): the worker is not to blame for it.
    if (now - tickedAt > 3 * PING_EVERY_MS) answeredAt = now;
    tickedAt = now;
    const silentMs = now - answeredAt;
    if (silentMs > (loaded ? watchdogMs : Math.max(watchdogMs, LOADING_SILENCE_MS))) {
      clearInterval(watchdog);
      lastError = new Error(`its event loop answered nothing for ${silentMs} ms (STAGE_WATCHDOG_MS=${watchdogMs}): a handler that never yields`);
      logger.error('stage worker thread does not answer: terminating it', { silentMs, watchdogMs });
      void worker.terminate();
      return;
    }
    if (asking) return;
    asking = true;
    channel().call('worker.ping', []).then(() => { answeredAt = Date.now(); }, () => undefined).finally(() => { asking = false; });
  }, PING_EVERY_MS);
  watchdog.unref();

  let checks: string[];
  try {
    checks = await rpc.call<string[]>('worker.start', []);
  } catch (error) {
    stopping = true;
    await worker.terminate();
    await exited;
    await hostClosed;
    // A configuration error found in the worker (a key that opens no credential) ends the start with 78, as on one thread.
    throw error instanceof Error && error.name === 'ConfigError' ? ConfigError.revived(error.message) : error;
  }
  return {
    readiness: checks.map((name) => ({ name, check: () => channel().call<string | null>('worker.readiness', [name], [], READINESS_WAIT_MS) })),
    failed,
    closed: exited.then(() => hostClosed),
    async stopping() {
      if (gone) return;
      await channel().call('worker.stopping', [], [], READINESS_WAIT_MS).catch(() => undefined);
    },
    async stop(deadline) {
      if (stopping) return;
      stopping = true;
      // Gone already (and reported through `failed`): nothing of it is left to stop.
      if (gone) { await host?.close(); return; }
      try {
        await channel().call('worker.stop', [deadline ?? null]);
      } finally {
        await host?.close();
        await worker.terminate();
        await exited;
      }
    },
  };
}

/** Restarts of the stage worker allowed within RESTART_WINDOW_MS; past them the process stops, for a supervisor to restart it. */
export const MAX_WORKER_RESTARTS = 8;
const RESTART_WINDOW_MS = 10 * 60_000;
/** Between a worker's end and its successor's start: a worker that ends at once does not spin. */
const RESTART_DELAY_MS = 1_000;

/**
 * The stage worker, started again in this process when it ends on its own (a crash, the heap exhausted, the
 * watchdog): the receiver goes on accepting, and the records the worker held, never committed, are read again by
 * its successor (the crash marks narrow down a record that ends every worker, crash-guard.ts). So `npm start`,
 * which has no supervisor, outlives a poison record. Past MAX_WORKER_RESTARTS in ten minutes, or when a
 * successor cannot start, `failed` settles and the process stops non-zero, as before.
 */
export async function superviseStageThread(start: () => Promise<StageThread>, logger: Logger): Promise<StageThread> {
  let current = await start();
  let stopping = false;
  /** stopping() was called: a successor that starts from now on is told too, or its marks would not say so. */
  let stopAsked = false;
  let restarting: Promise<void> = Promise.resolve();
  const restarts: number[] = [];
  let reportFailure: (error: Error) => void = () => undefined;
  const failed = new Promise<Error>((resolve) => { reportFailure = resolve; });
  let closed: () => void = () => undefined;
  const allClosed = new Promise<void>((resolve) => { closed = resolve; });

  /** The worker ended (or a successor failed to start): another, unless that has happened too often. */
  const ended = (error: Error, previous: Promise<void>) => {
    if (stopping) return;
    const now = Date.now();
    while (restarts.length > 0 && now - restarts[0] > RESTART_WINDOW_MS) restarts.shift();
    if (restarts.length >= MAX_WORKER_RESTARTS) {
      logger.error('stage worker thread ended too often: the stages no longer run; stopping the process', { restarts: restarts.length, windowMs: RESTART_WINDOW_MS, error });
      reportFailure(error);
      return;
    }
    restarts.push(now);
    logger.error('stage worker thread ended: starting another', { restart: restarts.length, of: MAX_WORKER_RESTARTS, windowMs: RESTART_WINDOW_MS, error });
    restarting = (async () => {
      // Its stages released on this thread first: the successor's stages register under the same names.
      await previous;
      await new Promise((resolve) => setTimeout(resolve, RESTART_DELAY_MS));
      if (stopping) return;
      let next: StageThread;
      try {
        next = await start();
      } catch (startError) {
        const failure = startError instanceof Error ? startError : new Error(String(startError));
        // A configuration that no longer holds will not hold on the next try either; anything else (a worker
        // that ended while starting, on a record handed to it at once) counts as one more end.
        if (failure.name === 'ConfigError') {
          logger.error('stage worker thread could not be started again: stopping the process', { error: failure });
          reportFailure(failure);
        } else ended(failure, Promise.resolve());
        return;
      }
      // Asked to stop while it started: it goes at once, rather than outliving the process's stop. A stop that
      // began while it started reached its predecessor alone; its own in-hand records are excused as well.
      if (stopAsked) await next.stopping();
      if (stopping) { await next.stop(); return; }
      current = next;
      watch(next);
    })();
  };
  const watch = (thread: StageThread) => {
    void thread.failed.then((error) => { if (!stopping && thread === current) ended(error, thread.closed); });
  };
  watch(current);
  return {
    // The checks of whichever worker runs now (or the one that ended, which answers with its error meanwhile).
    readiness: current.readiness.map(({ name }) => ({
      name,
      check: () => current.readiness.find((c) => c.name === name)?.check() ?? `no readiness check ${name} in the stage worker`,
    })),
    failed,
    closed: allClosed,
    stopping: () => {
      stopAsked = true;
      return current.stopping();
    },
    async stop(deadline) {
      stopping = true;
      // A restart under way finishes first (one that fails to start may have begun another).
      for (let seen = restarting; ; seen = restarting) {
        await seen;
        if (seen === restarting) break;
      }
      try {
        await current.stop(deadline);
      } finally {
        closed();
      }
    },
  };
}
