import { hookBaseUrl } from '../../platform/config/config';
import { listenUrl } from '../../platform/net/listen-url';
import { startAdminServer, type AdminServer, type ReadinessCheck } from '../../platform/health/admin-server';
import { startTelemetry } from '../../platform/telemetry/sdk';
import { allowOnly, UsageError, type ParsedArgs } from '../args';
import { openBackends } from '../backends';
import type { CommandContext } from '../context';
import { SERVICES, triggerCatalog, type RunningServices, type ServiceName } from '../start';
import { startServicesInThreads } from '../stage-thread';
import { startManagementApi, type ManagementApi } from '../../admin/management-api';

export const START_USAGE = `ingress start [--services ${SERVICES.join(',')}]`;

/**
 * Run the services (all by default) until SIGTERM or SIGINT, then shut down gracefully: /readyz turns 503, the
 * receiver stops accepting and finishes the requests in flight, the stages commit and stop, the backends close.
 * All of it within SHUTDOWN_GRACE_MS (the receiver gets 80% of it); past that, or on a second signal, the
 * process exits at once with status 1 (what was answered 200 is durable either way). The last telemetry flush
 * gets what the grace has left, and failing it only logs a warning.
 */
export async function startCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['services']);
  const list = args.flags.get('services');
  const services = (list === undefined ? [...SERVICES] : String(list).split(',').map((s) => s.trim()).filter(Boolean)) as ServiceName[];
  const unknown = services.filter((s) => !SERVICES.includes(s));
  if (list === true || services.length === 0 || unknown.length) throw new UsageError(`--services takes a comma-separated list of ${SERVICES.join(', ')}${unknown.length ? ` (unknown: ${unknown.join(', ')})` : ''}`);

  let phase: ReadinessCheck = { name: 'process', check: () => 'starting' };
  let running: RunningServices | null = null;
  // The management API is served once the backends are open; until then (and from shutdown on) /api answers 503.
  let api: ManagementApi | null = null;
  const admin: AdminServer | null = ctx.config.adminPort === null ? null : await startAdminServer({
    port: ctx.config.adminPort, host: ctx.config.adminHost, logger: ctx.logger,
    checks: () => [phase, ...(running?.readiness ?? [])],
    routes: () => api?.listener ?? null,
  });
  const stopTelemetry = await startTelemetry(ctx.env, ctx.logger);
  let backends;
  try {
    backends = await openBackends(ctx.config, ctx.logger);
    try {
      running = await startServicesInThreads(ctx.config, ctx.env, backends, services, ctx.logger);
      if (admin) {
        api = await startManagementApi({
          config: ctx.config, adminPort: admin.port, ingressPort: running.port, log: backends.log, registry: backends.registry, sealer: backends.sealer, store: backends.store,
          catalog: triggerCatalog(ctx.config), logger: ctx.logger,
        }).catch(async (error) => { await running?.stop(); throw error; });
      }
    } catch (error) {
      await backends.close();
      throw error;
    }
  } catch (error) {
    await admin?.close();
    await stopTelemetry(ctx.config.shutdownGraceMs);
    throw error;
  }
  phase = { name: 'process', check: () => null };
  // Listen for the signals before saying we started: whoever waits for that line may signal at once.
  const signalled = new Promise<string>((resolve) => {
    // Signal listeners do not keep Node running: stages alone on the embedded log wait on promises only.
    const keepAlive = setInterval(() => undefined, 1 << 30);
    const stop = (name: string) => { clearInterval(keepAlive); resolve(name); };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  ctx.logger.info('ingress started', {
    // Without a receiver here, and no PUBLIC_BASE_URL, a base made from this process's PORT would name an address
    // nothing serves: none is printed.
    services, port: running.port, adminPort: admin?.port ?? null,
    hookBaseUrl: running.port !== null || ctx.config.publicBaseUrl !== null ? hookBaseUrl(ctx.config, running.port) : undefined, log: backends.log.kind, store: backends.store.kind, registry: backends.registry.kind,
    dataDir: backends.log.kind === 'embedded' || backends.store.kind === 'filesystem' || backends.registry.kind === 'file' ? ctx.config.dataDir : undefined,
  });
  // The port bound, not the configured one (PORT=0: the OS picked it); an IPv6 address in brackets.
  if (running.port !== null) ctx.err(`ingress listening on ${listenUrl(ctx.config.host, running.port)} (POST /hook/{workflowId})`);
  if (api && admin) ctx.err(`management API at ${listenUrl(ctx.config.adminHost, admin.port)}/api/v1 (docs/management-api.md)`);

  // A stage worker that ended on its own leaves a pipeline that no longer moves: stop, and exit non-zero.
  const failure = running.failed?.then((error) => ({ error })) ?? new Promise<never>(() => undefined);
  const outcome = await Promise.race([signalled.then((name) => ({ name })), failure]);
  const signal = 'name' in outcome ? outcome.name : 'stage-worker-exit';
  phase = { name: 'process', check: () => 'shutting down' };
  const grace = ctx.config.shutdownGraceMs;
  const deadline = Date.now() + grace;
  ctx.logger.info('stopping', { signal, graceMs: grace });
  const stopped = (async () => {
    // Replays first: they append to the log the stages are about to stop writing.
    const stopping = api;
    api = null;
    await stopping?.stop();
    await running.stop(Math.floor(grace * 0.8), deadline);
    await backends.close();
    return 'error' in outcome ? 1 : 0;
  })();
  let timer: NodeJS.Timeout | undefined;
  let cutShort = false;
  const cut = new Promise<number>((resolve) => {
    timer = setTimeout(() => { cutShort = true; ctx.logger.error('shutdown did not finish within SHUTDOWN_GRACE_MS; exiting', { graceMs: grace }); resolve(1); }, grace);
    const again = (name: string) => { cutShort = true; ctx.logger.error('second signal during shutdown; exiting', { signal: name }); resolve(1); };
    process.once('SIGTERM', () => again('SIGTERM'));
    process.once('SIGINT', () => again('SIGINT'));
  });
  const code = await Promise.race([stopped, cut]);
  clearTimeout(timer);
  await admin?.close();
  // Whatever the grace has left: a collector that is away costs the last spans, not the exit status. Cut short
  // (the deadline, a second signal), the process exits at once.
  if (!cutShort) await stopTelemetry(deadline - Date.now());
  if (code === 0) ctx.logger.info('stopped', { signal });
  else if ('error' in outcome) ctx.logger.error('stopped after the stage worker thread exited', { error: outcome.error });
  return code;
}
