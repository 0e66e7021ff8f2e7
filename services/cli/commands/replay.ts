import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../platform/avro/codec';
import { workflowOfRecord } from '../../platform/log/record-keys';
import { replayHeaders, replayOf } from '../../platform/log/replay-marking';
import { pipelineTopics } from '../../platform/log/topics';
import { allowOnly, positionFlag, stringFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { checkpointFile } from '../refeed';
import { readStart, runRefeed, until, withLog } from './refeed-run';

export const REPLAY_USAGE = 'ingress replay TOPIC --from OFFSET|ISO-TIME [--to OFFSET|ISO-TIME] [--workflow ID] [--checkpoint FILE]';

/**
 * Re-feed a range of a stage's input topic into that stage: each record is appended again to the same topic,
 * marked as a replay (replay-marking.ts), so the decoder (ingress.received.v1) or the dispatcher
 * (ingress.decoded.v1) runs on it again with today's workflows and code. Records that are replays themselves are
 * skipped, so replaying a range twice does not replay the first replay's copies. `--to` is inclusive for an
 * offset, exclusive for a time; an offset applies to every partition.
 *
 * Resumable: the checkpoint (default `$DATA_DIR/replay/<hash of the request>.json`) records each partition's
 * progress; the same command again goes on where Ctrl-C stopped it, and once complete does nothing.
 */
export async function replayCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['from', 'to', 'workflow', 'checkpoint']);
  const [topic] = args.positionals;
  const from = positionFlag(args, 'from', 'offset-or-time');
  if (!topic || args.positionals.length > 1 || !from) throw new UsageError(`usage: ${REPLAY_USAGE}`);
  const topics = pipelineTopics(ctx.config.topicPrefix);
  if (topic !== topics.received && topic !== topics.decoded) {
    throw new UsageError(`replay re-feeds a stage's input topic: ${topics.received} (decoder) or ${topics.decoded} (dispatcher); for dead letters use \`ingress dead-letters replay\``);
  }
  const to = positionFlag(args, 'to', 'offset-or-time');
  const workflow = stringFlag(args, 'workflow');
  const codec = defaultAvroCodec();
  const request = { topic, from: args.flags.get('from') as string, to: (args.flags.get('to') as string | undefined) ?? null, workflow };
  const file = stringFlag(args, 'checkpoint')
    ?? path.join(ctx.config.dataDir, 'replay', `${createHash('sha256').update(JSON.stringify(request)).digest('hex').slice(0, 16)}.json`);
  return withLog(ctx, true, (log) => runRefeed(ctx, {
    label: `replay ${topic}`,
    summary: true,
    request,
    log,
    source: topic,
    start: readStart(from),
    until: until(to),
    checkpoint: checkpointFile(file),
    select: (record) => {
      if (replayOf(record.headers) !== null) return null;
      // The workflow is read from the record: under RECORD_KEY=request the key is the request id.
      if (workflow !== null && workflowOfRecord(record, codec, ctx.config.recordKey) !== workflow) return null;
      return { topic, key: record.key, value: record.value, headers: replayHeaders(record) };
    },
  }));
}
