import { defaultAvroCodec } from '../../platform/avro/codec';
import { pipelineTopics } from '../../platform/log/topics';
import { deadLetterReplayPlan, deadLetterSelector, deadLetterSummary, readStart, type ReplayContext } from '../../admin/operations/replays';
import { allowOnly, positionFlag, stringFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { runRefeed, withLog } from './refeed-run';
import { replayThroughApi } from './through-api';

export const DEAD_LETTERS_USAGE = 'ingress dead-letters list|replay [--stage S] [--since ISO-TIME] [--workflow ID] [--with-source (list)]';

/**
 * `list`: one JSON line per dead letter (where it sits, why it failed, which request), without the source
 * record's bytes unless `--with-source`. `replay`: append each selected dead letter's source record to the topic
 * it came from, marked as a replay (admin/operations/replays.ts); while a service runs, its management API does
 * it (POST /api/v1/dead-letters/replay). Both read the dead-letter topic up to its end as of the start.
 */
export async function deadLettersCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['stage', 'since', 'workflow', 'with-source']);
  const [verb, ...extra] = args.positionals;
  if ((verb !== 'list' && verb !== 'replay') || extra.length > 0) throw new UsageError(`usage: ${DEAD_LETTERS_USAGE}`);
  if (verb === 'replay' && args.flags.has('with-source')) throw new UsageError('--with-source is for list');
  const stage = stringFlag(args, 'stage');
  const workflow = stringFlag(args, 'workflow');
  const since = positionFlag(args, 'since', 'time');
  const sinceText = (args.flags.get('since') as string | undefined) ?? null;
  const topics = pipelineTopics(ctx.config.topicPrefix);
  const codec = defaultAvroCodec();
  const context: ReplayContext = { topics, codec, recordKey: ctx.config.recordKey, skipped: (message) => ctx.err(message) };
  const request = { verb, stage, workflow, since: sinceText };

  if (verb === 'replay') {
    const api = await ctx.runningService();
    if (api) return replayThroughApi(ctx, api, 'dead-letters replay', '/api/v1/dead-letters/replay', { stage, workflow, since: sinceText });
    const plan = deadLetterReplayPlan({ stage, workflow, since: sinceText, letters: null }, context);
    return withLog(ctx, true, (log) => runRefeed(ctx, { label: 'dead-letters replay', summary: true, request, log, ...plan, checkpoint: null }));
  }
  const selected = deadLetterSelector({ stage, workflow, letters: null }, context);
  const withSource = args.flags.has('with-source');
  return withLog(ctx, false, (log) => runRefeed(ctx, {
    label: 'dead-letters list',
    summary: false,
    request,
    log,
    source: topics.deadLetter,
    start: readStart(since),
    until: null,
    checkpoint: null,
    select: (record) => {
      const letter = selected(record);
      if (letter) ctx.out(JSON.stringify(deadLetterSummary(record, letter, codec, withSource)));
      return null;
    },
  }));
}
