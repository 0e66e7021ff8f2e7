import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { defaultAvroCodec } from '../../platform/avro/codec';
import { checkpointFile } from '../../admin/operations/refeed';
import { openReplayLedger } from '../../admin/operations/replay-ledger';
import { pipelineTopics } from '../../platform/log/topics';
import { checkDeadLetterRequest, deadLetterReplayId, deadLetterReplayPlan, deadLetterRequestFields, deadLetterSelector, deadLetterSummary, normalDeadLetterRequest, readStart, ReplayRequestError, type ReplayContext } from '../../admin/operations/replays';
import { allowOnly, positionFlag, stringFlag, switchFlag, unknownCopiesFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { runRefeed, withLog } from './refeed-run';
import { replayThroughApi } from './through-api';

/** Skipped letters a replay's summary counts apart from those its filters left out. */
const DUPLICATE_REASONS = ['duplicates', 'unrecorded'];

export const DEAD_LETTERS_USAGE = 'ingress dead-letters list|replay [--stage S] [--since ISO-TIME] [--workflow ID] [--with-source (list)] [--unknown-copies skip|append (replay)]';

/**
 * `list`: one JSON line per dead letter (where it sits, why it failed, which request), without the source
 * record's bytes unless `--with-source`. `replay`: append each selected dead letter's source record to the topic
 * it came from, marked as a replay (admin/operations/replays.ts); while a service runs, its management API does
 * it (POST /api/v1/dead-letters/replay). Both read the dead-letter topic up to its end as of the start. A replay
 * stopped short is resumed by the same command, directly (its checkpoint `$DATA_DIR/replay/dead-letters-<hash of
 * the filters>.json`, removed once complete) or through the service (its unfinished job of the same filters).
 */
export async function deadLettersCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, ['stage', 'since', 'workflow', 'with-source', 'unknown-copies']);
  const [verb, ...extra] = args.positionals;
  if ((verb !== 'list' && verb !== 'replay') || extra.length > 0) throw new UsageError(`usage: ${DEAD_LETTERS_USAGE}`);
  if (verb === 'replay' && args.flags.has('with-source')) throw new UsageError('--with-source is for list');
  if (verb === 'list' && args.flags.has('unknown-copies')) throw new UsageError('--unknown-copies is for replay');
  const unknownCopies = unknownCopiesFlag(args);
  switchFlag(args, 'with-source');
  const stage = stringFlag(args, 'stage');
  const workflow = stringFlag(args, 'workflow');
  const since = positionFlag(args, 'since', 'time');
  const sinceText = (args.flags.get('since') as string | undefined) ?? null;
  const topics = pipelineTopics(ctx.config.topicPrefix);
  const codec = defaultAvroCodec();
  const context: ReplayContext = { topics, codec, recordKey: ctx.config.recordKey, skipped: (message) => ctx.err(message) };
  const request = { verb, stage, workflow, since: sinceText };
  // Bad filters (an unknown --stage) are the caller's mistake: usage (exit 2), as `replay`'s are.
  let selected: ReturnType<typeof deadLetterSelector>;
  try { selected = deadLetterSelector({ stage, workflow, letters: null }, context); } catch (error) {
    if (error instanceof ReplayRequestError) throw new UsageError(error.message);
    throw error;
  }

  if (verb === 'replay') {
    const api = await ctx.runningService();
    // The service goes on with an unfinished replay of the same filters (replay-jobs.ts), so the same command resumes.
    if (api) return replayThroughApi(ctx, api, 'dead-letters replay', '/api/v1/dead-letters/replay', { stage, workflow, since: sinceText, ...(unknownCopies ? { unknownCopies } : {}) });
    const asked = { stage, workflow, since: sinceText, letters: null };
    checkDeadLetterRequest(asked); // refuses bad filters in their own words
    const filters = normalDeadLetterRequest(asked);
    // Resumable as a range replay is, while unfinished: Ctrl-C, then the same command goes on from here. A replay
    // that finished is history: the checkpoint is removed, so that the same command later (after another fix) is
    // a new replay rather than nothing.
    const checkpoint = checkpointFile(path.join(ctx.config.dataDir, 'replay', `dead-letters-${deadLetterReplayId(filters)}.json`));
    const saved = await checkpoint.load();
    if (saved?.complete) await fsp.rm(checkpoint.path, { force: true }); // finished by a run killed before its removal
    // The run's name in the replay ledger, kept in its checkpoint: a resumed run finds its own claims, and a new
    // replay of the same filters is another replay, whose letters of originals this one replayed are duplicates.
    const run = (!saved?.complete && saved?.request.run) || `cli-${randomBytes(8).toString('hex')}`;
    const request = { verb, run, ...deadLetterRequestFields(filters) };
    // Written before the ledger (its request names no run): adopted under this run's name, so that the same command
    // goes on from it rather than being refused as another replay's. That run's letters have no claims to find.
    if (saved && !saved.complete && saved.request.run === undefined && JSON.stringify(saved.request) === JSON.stringify({ verb, ...deadLetterRequestFields(filters) })) {
      await checkpoint.save({ ...saved, request });
    }
    const code = await withLog(ctx, true, async (log) => {
      const firsts = Object.fromEntries((await log.firstOffsets(topics.deadLetter)).map((p) => [String(p.partition), p.offset]));
      const store = await ctx.openStore();
      try {
        const ledger = await openReplayLedger(store, {
          deadLetterTopic: topics.deadLetter, firsts, cap: ctx.config.replayLedgerMaxOriginals, notice: (message) => ctx.err(message),
          legacyFile: path.join(ctx.config.dataDir, 'replay', 'replayed-originals.jsonl'),
        });
        const plan = deadLetterReplayPlan(filters, context, { ledger, replay: run });
        return await runRefeed(ctx, { label: 'dead-letters replay', summary: true, reasons: DUPLICATE_REASONS, request, log, ...plan, checkpoint, unknownCopies });
      } finally {
        await store.close();
      }
    });
    if (code === 0) await fsp.rm(checkpoint.path, { force: true });
    return code;
  }
  const withSource = switchFlag(args, 'with-source');
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
