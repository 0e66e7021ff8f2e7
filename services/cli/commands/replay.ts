import * as path from 'node:path';
import { defaultAvroCodec } from '../../platform/avro/codec';
import { pipelineTopics } from '../../platform/log/topics';
import { checkpointFile } from '../../admin/operations/refeed';
import { normalRangeRequest, rangeReplayId, rangeReplayPlan, ReplayRequestError, type RangeReplayRequest } from '../../admin/operations/replays';
import { allowOnly, positionFlag, stringFlag, unknownCopiesFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { runRefeed, withLog } from './refeed-run';
import { replayThroughApi } from './through-api';

export const REPLAY_USAGE = 'ingress replay TOPIC --from OFFSET|ISO-TIME [--to OFFSET|ISO-TIME] [--workflow ID] [--checkpoint FILE] [--unknown-copies skip|append]';

/**
 * Re-feed a range of a stage's input topic into that stage (admin/operations/replays.ts says how). While a
 * service runs, its management API runs the replay (POST /api/v1/replays), so on the embedded log it needs no
 * stop; otherwise the CLI appends itself.
 *
 * Resumable: the checkpoint (default `$DATA_DIR/replay/<hash of the normalised request>.json`, the file the service uses
 * for the same request) records each partition's progress; the same command again goes on where Ctrl-C stopped
 * it, and once complete does nothing. `--unknown-copies` decides, for that run, the copies of a died run's announced
 * batch that retention may have deleted (refeed.ts CopiesUnknown: the run fails without it, saying so).
 */
export async function replayCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['from', 'to', 'workflow', 'checkpoint', 'unknown-copies']);
  const unknownCopies = unknownCopiesFlag(args);
  const [topic] = args.positionals;
  const from = positionFlag(args, 'from', 'offset-or-time');
  if (!topic || args.positionals.length > 1 || !from) throw new UsageError(`usage: ${REPLAY_USAGE}`);
  positionFlag(args, 'to', 'offset-or-time');
  const topics = pipelineTopics(ctx.config.topicPrefix);
  const codec = defaultAvroCodec();
  const asked: RangeReplayRequest = { topic, from: args.flags.get('from') as string, to: (args.flags.get('to') as string | undefined) ?? null, workflow: stringFlag(args, 'workflow') };
  let request: RangeReplayRequest;
  let plan;
  try {
    plan = rangeReplayPlan(asked, { topics, codec, recordKey: ctx.config.recordKey });
    // The range in one spelling, as the service keeps it: the checkpoint (its name and its request) is the same either way.
    request = normalRangeRequest(asked);
  } catch (error) {
    if (error instanceof ReplayRequestError) throw new UsageError(error.message.replace('for dead letters replay the dead letters', 'for dead letters use `ingress dead-letters replay`'));
    throw error;
  }
  const api = await ctx.runningService();
  if (api) {
    if (args.flags.has('checkpoint')) throw new UsageError(`a service is running (${api.url}): it runs the replay and keeps its checkpoint under its DATA_DIR/replay; leave out --checkpoint`);
    return replayThroughApi(ctx, api, `replay ${topic}`, '/api/v1/replays', { ...request, ...(unknownCopies ? { unknownCopies } : {}) });
  }
  const file = stringFlag(args, 'checkpoint') ?? path.join(ctx.config.dataDir, 'replay', `${rangeReplayId(request)}.json`);
  return withLog(ctx, true, (log) => runRefeed(ctx, {
    label: `replay ${topic}`,
    summary: true,
    request: { ...request },
    log,
    ...plan,
    checkpoint: checkpointFile(file),
    unknownCopies,
  }));
}
