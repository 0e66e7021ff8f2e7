import { startTelemetry } from '../../platform/telemetry/sdk';
import { allowOnly, UsageError, type ParsedArgs } from '../args';
import { openBackends } from '../backends';
import type { CommandContext } from '../context';
import { SERVICES, startServices, type ServiceName } from '../start';

export const START_USAGE = `ingress start [--services ${SERVICES.join(',')}]`;

/** Run the services (all by default) until SIGTERM or SIGINT, then stop in order and exit. */
export async function startCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['services']);
  const list = args.flags.get('services');
  const services = (list === undefined ? [...SERVICES] : String(list).split(',').map((s) => s.trim()).filter(Boolean)) as ServiceName[];
  const unknown = services.filter((s) => !SERVICES.includes(s));
  if (list === true || services.length === 0 || unknown.length) throw new UsageError(`--services takes a comma-separated list of ${SERVICES.join(', ')}${unknown.length ? ` (unknown: ${unknown.join(', ')})` : ''}`);

  const stopTelemetry = await startTelemetry(process.env, ctx.logger);
  const backends = await openBackends(ctx.config, ctx.logger);
  let running;
  try {
    running = await startServices(ctx.config, backends, services, ctx.logger);
  } catch (error) {
    await backends.close();
    await stopTelemetry();
    throw error;
  }
  ctx.logger.info('ingress started', {
    services, port: running.port, log: backends.log.kind, store: backends.store.kind, registry: backends.registry.kind,
    dataDir: backends.log.kind === 'embedded' || backends.store.kind === 'filesystem' || backends.registry.kind === 'file' ? ctx.config.dataDir : undefined,
  });
  if (running.port !== null) ctx.err(`ingress listening on http://${ctx.config.host === '0.0.0.0' ? 'localhost' : ctx.config.host}:${running.port} (POST /hook/{workflowId})`);

  await new Promise<void>((resolve) => {
    // Signal listeners do not keep Node running: stages alone on the embedded log wait on promises only.
    const keepAlive = setInterval(() => undefined, 1 << 30);
    const stop = (signal: string) => { clearInterval(keepAlive); ctx.logger.info('stopping', { signal }); resolve(); };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await running.stop();
  await backends.close();
  await stopTelemetry();
  return 0;
}
