import { defaultAvroCodec, type AvroCodec } from '../../platform/avro/codec';
import type { DeadLetter } from '../../platform/avro/records';
import type { LogRecord } from '../../platform/log/event-log';
import { recordIdentity, replayHeaders } from '../../platform/log/replay-marking';
import { pipelineTopics } from '../../platform/log/topics';
import { allowOnly, positionFlag, stringFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { readStart, runRefeed, withLog } from './refeed-run';

export const DEAD_LETTERS_USAGE = 'ingress dead-letters list|replay [--stage S] [--since ISO-TIME] [--workflow ID] [--with-source (list)]';

/**
 * `list`: one JSON line per dead letter (where it sits, why it failed, which request), without the source
 * record's bytes unless `--with-source`. `replay`: append each selected dead letter's source record to the topic
 * it came from (its stage's input), marked as a replay of the source's original position, so the stage runs
 * on it again after a fix. Both read the dead-letter topic up to its end as of the start and stop there.
 */
export async function deadLettersCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['stage', 'since', 'workflow', 'with-source']);
  const [verb, ...extra] = args.positionals;
  if ((verb !== 'list' && verb !== 'replay') || extra.length > 0) throw new UsageError(`usage: ${DEAD_LETTERS_USAGE}`);
  if (verb === 'replay' && args.flags.has('with-source')) throw new UsageError('--with-source is for list');
  const stage = stringFlag(args, 'stage');
  const workflow = stringFlag(args, 'workflow');
  const since = positionFlag(args, 'since', 'time');
  const topics = pipelineTopics(ctx.config.topicPrefix);
  const stageInputs = new Set([topics.received, topics.decoded]);
  const codec = defaultAvroCodec();
  const selected = (record: LogRecord): DeadLetter | null => {
    let letter: DeadLetter;
    try { letter = codec.decode('DeadLetter', record.value); } catch (error) {
      ctx.err(`skipped ${recordIdentity(record)}: not a dead letter (${(error as Error).message})`);
      return null;
    }
    if (stage !== null && letter.stage !== stage) return null;
    if (workflow !== null && letter.workflowId !== workflow) return null;
    return letter;
  };
  const withSource = args.flags.has('with-source');
  return withLog(ctx, verb === 'replay', (log) => runRefeed(ctx, {
    label: `dead-letters ${verb}`,
    summary: verb === 'replay',
    request: { verb, stage, workflow, since: (args.flags.get('since') as string | undefined) ?? null },
    log,
    source: topics.deadLetter,
    start: readStart(since),
    until: null,
    checkpoint: null,
    select: (record) => {
      const letter = selected(record);
      if (!letter) return null;
      if (verb === 'list') {
        ctx.out(JSON.stringify(deadLetterLine(record, letter, codec, withSource)));
        return null;
      }
      if (!stageInputs.has(letter.source.topic)) {
        ctx.err(`skipped dead letter ${recordIdentity(record)}: its source topic ${letter.source.topic} is no stage input of this pipeline`);
        return null;
      }
      const source = { ...letter.source, key: letter.source.key === null ? null : letter.source.key.toString('utf8') };
      return { topic: source.topic, key: source.key, value: source.value, headers: replayHeaders(source) };
    },
  }));
}

function deadLetterLine(record: LogRecord, letter: DeadLetter, codec: AvroCodec, withSource: boolean): Record<string, unknown> {
  const line: Record<string, unknown> = {
    stage: letter.stage, code: letter.errorCode, message: letter.message, attempts: letter.attempts,
    failedAt: new Date(letter.failedAt).toISOString(), workflowId: letter.workflowId, requestId: requestIdOf(letter.source.value, codec),
    partition: record.partition, offset: record.offset, source: recordIdentity(letter.source),
  };
  if (withSource) line.sourceRecord = { key: letter.source.key?.toString('utf8') ?? null, headers: letter.source.headers, value: letter.source.value.toString('base64') };
  return line;
}

/** The request a source record belongs to, when it is one of ours and decodes. */
function requestIdOf(value: Buffer, codec: AvroCodec): string | null {
  try {
    const name = codec.nameOf(value);
    if (name !== 'Received' && name !== 'Decoded') return null;
    return codec.decode(name, value).requestId;
  } catch {
    return null;
  }
}
