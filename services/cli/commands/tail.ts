import { defaultAvroCodec } from '../../platform/avro/codec';
import type { ReadStart } from '../../platform/log/event-log';
import { allowOnly, numberFlag, switchFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { topicSpecs } from '../pipeline-topics';
import { recordToJson } from '../../admin/operations/records-json';

export const TAIL_USAGE = 'ingress tail TOPIC [--from-beginning] [--max N] [--timeout SECONDS]';

/** Print a topic's records, one JSON object per line; new ones only unless --from-beginning. */
export async function tailCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['from-beginning', 'max', 'timeout']);
  const [topic] = args.positionals;
  if (!topic || args.positionals.length > 1) throw new UsageError(`usage: ${TAIL_USAGE}`);
  // Another name would be read as an empty topic until --timeout (or for ever), and say nothing of the typo.
  const known = topicSpecs(ctx.config).map((s) => s.topic);
  if (!known.includes(topic)) throw new UsageError(`no pipeline topic ${JSON.stringify(topic)}; tail reads ${known.join(', ')}`);
  const max = numberFlag(args, 'max', 1, 1e9);
  // Seconds a timer can hold (2^31 - 1 ms).
  const idleSeconds = numberFlag(args, 'timeout', 0, 2_147_483);
  const start: ReadStart = switchFlag(args, 'from-beginning') ? { from: 'beginning' } : { from: 'end' };
  const log = await ctx.openLog();
  const codec = defaultAvroCodec();
  const abort = new AbortController();
  const onSignal = () => abort.abort();
  process.once('SIGINT', onSignal);
  let idle: NodeJS.Timeout | undefined;
  const arm = () => {
    if (idleSeconds === null) return;
    clearTimeout(idle);
    idle = setTimeout(() => abort.abort(), idleSeconds * 1000);
  };
  let count = 0;
  try {
    arm();
    for await (const record of log.read(topic, { start, signal: abort.signal })) {
      ctx.out(recordToJson(record, codec));
      arm();
      if (max !== null && ++count >= max) break;
    }
  } finally {
    clearTimeout(idle);
    process.off('SIGINT', onSignal);
    await log.close();
  }
  return 0;
}
