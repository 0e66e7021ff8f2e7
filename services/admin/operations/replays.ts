import { createHash } from 'node:crypto';
import type { AvroCodec } from '../../platform/avro/codec';
import type { DeadLetter } from '../../platform/avro/records';
import { requestIdOf } from '../../platform/avro/request-id';
import type { EventLog, LogRecord, OutRecord, PartitionOffset, ReadStart } from '../../platform/log/event-log';
import { workflowOfRecord, type RecordKeyMode } from '../../platform/log/record-keys';
import { recordIdentity, replayHeaders, replayOf } from '../../platform/log/replay-marking';
import type { PipelineTopics } from '../../platform/log/topics';
import type { Held, Skip, Until, Withdrawn } from './refeed';
import type { ReplayClaim, ReplayLedger } from './replay-ledger';
import { parseTime, quoted, TIME_FORMS } from './times';

/**
 * The two replays an operator runs, as plans the refeed loop (refeed.ts) carries out, shared by the CLI
 * (`ingress replay`, `ingress dead-letters replay`) and the management API (`POST /api/v1/replays`,
 * `POST /api/v1/dead-letters/replay`): the same checks, the same selection, the same replay marking.
 */
export class ReplayRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplayRequestError';
  }
}

/** What a range replay was asked: positions as text (an offset or an ISO time); normalRangeRequest gives the one spelling a checkpoint and an id are made of. */
export interface RangeReplayRequest {
  topic: string;
  from: string;
  to: string | null;
  workflow: string | null;
}

export interface DeadLetterReplayRequest {
  stage: string | null;
  workflow: string | null;
  since: string | null;
  /** Only these dead letters, by their place in the dead-letter topic (`<partition>/<offset>`); null for every one the filters select. */
  letters: string[] | null;
}

export interface RefeedPlan {
  source: string;
  start: ReadStart;
  until: Until;
  select(record: LogRecord): OutRecord | Skip | Held | null;
  /** Before each batch of copies is appended; may withdraw copies from it (refeed.ts). */
  beforeAppend?(log: EventLog, batch: readonly OutRecord[]): Promise<Withdrawn[]>;
  /** The request a copy belongs to, for what a report lists of it (refeed.ts). */
  requestIdOf?(copy: OutRecord): string | null;
}

export interface ReplayContext {
  topics: PipelineTopics;
  codec: AvroCodec;
  recordKey: RecordKeyMode;
  /** Told about dead letters that are skipped, and why. */
  skipped?(message: string): void;
}

/** The stages that dead-letter, each under its own name (the DeadLetter's `stage`): what a stage filter may name. */
export const DEAD_LETTER_STAGES: readonly string[] = ['decoder', 'dispatcher', 'sampler', 'mdn'];

/** `42` (an offset) or an ISO time (times.ts); what `--from`, `--to`, `--since`, `--until` and the API's fields accept. */
export type Position = { offset: bigint } | { time: number };

export function parsePosition(value: string, name: string, what: 'offset-or-time' | 'time'): Position {
  if (what === 'offset-or-time' && /^\d+$/.test(value)) return { offset: BigInt(value) };
  const parsed = parseTime(value);
  if ('problem' in parsed) {
    throw new ReplayRequestError(`${name} takes ${what === 'time' ? 'an ISO time' : 'an offset or an ISO time'}, ${TIME_FORMS}; ${quoted(value)} ${parsed.problem}`);
  }
  return parsed;
}

export function readStart(from: Position | null): ReadStart {
  if (!from) return { from: 'beginning' };
  return 'offset' in from ? { from: 'offset', offset: String(from.offset) } : { from: 'time', timestamp: from.time };
}

export function untilOf(to: Position | null): Until {
  if (!to) return null;
  return 'offset' in to ? { offset: to.offset } : { time: to.time };
}

/** A position in one spelling: an offset in decimal without leading zeros, a time as its instant in UTC to the millisecond. */
export function positionText(position: Position): string {
  return 'offset' in position ? String(position.offset) : new Date(position.time).toISOString();
}

/**
 * The request as the range it names: `0` and `00`, or `…05:00:00Z`, `…05:00:00.000Z` and `…06:00:00+01:00`, are one
 * range, so they must be one replay (one id, one checkpoint) rather than two that each append the range again.
 * Refuses a position that does not parse, naming the field.
 */
export function normalRangeRequest(request: RangeReplayRequest): RangeReplayRequest {
  const from = parsePosition(request.from, 'from', 'offset-or-time');
  const to = request.to === null ? null : parsePosition(request.to, 'to', 'offset-or-time');
  return { topic: request.topic, from: positionText(from), to: to === null ? null : positionText(to), workflow: request.workflow };
}

/**
 * A range replay's identity: the name of its checkpoint, so the same range asked again (in any spelling) resumes,
 * and once complete does nothing. The hash is of the normalised request, never of the text as typed.
 */
export function rangeReplayId(request: RangeReplayRequest): string {
  return createHash('sha256').update(JSON.stringify(normalRangeRequest(request))).digest('hex').slice(0, 16);
}

/**
 * Re-feed a range of a stage's input topic into that stage: each record is appended again to the same topic,
 * marked as a replay, so the decoder (received) or the dispatcher (decoded) runs on it again with today's
 * workflows and code. Records that are replays themselves are skipped, so replaying a range twice does not
 * replay the first replay's copies. `to` is inclusive for an offset, exclusive for a time.
 */
export function rangeReplayPlan(request: RangeReplayRequest, ctx: ReplayContext): RefeedPlan {
  const { topic, workflow } = request;
  if (topic !== ctx.topics.received && topic !== ctx.topics.decoded) {
    throw new ReplayRequestError(`replay re-feeds a stage's input topic: ${ctx.topics.received} (decoder) or ${ctx.topics.decoded} (dispatcher); for dead letters replay the dead letters`);
  }
  const from = parsePosition(request.from, 'from', 'offset-or-time');
  const to = request.to === null ? null : parsePosition(request.to, 'to', 'offset-or-time');
  // `to` is inclusive as an offset, exclusive as a time (refeed.ts); an offset and a time cannot be compared.
  if (from && to && ('offset' in from && 'offset' in to ? from.offset > to.offset : 'time' in from && 'time' in to && from.time >= to.time)) {
    throw new ReplayRequestError(`from (${request.from}) is not before to (${request.to}): nothing would be replayed`);
  }
  return {
    requestIdOf: (copy) => requestIdOf(copy.value, ctx.codec),
    source: topic,
    start: readStart(from),
    until: untilOf(to),
    select: (record) => {
      if (replayOf(record.headers) !== null) return null;
      // The workflow is read from the record: under RECORD_KEY=request the key is the request id.
      if (workflow !== null && workflowOfRecord(record, ctx.codec, ctx.recordKey) !== workflow) return null;
      return { topic, key: record.key, value: record.value, headers: replayHeaders(record) };
    },
  };
}

/**
 * A dead-letter replay's filters in one spelling (since as its UTC instant; letters in decimal, once each, in
 * order): what finds an unfinished replay of the same dead letters again, so that asking again goes on with it.
 * Call it on a request deadLetterReplayPlan accepted.
 */
export function normalDeadLetterRequest(request: DeadLetterReplayRequest): DeadLetterReplayRequest {
  const since = request.since === null ? null : positionText(parsePosition(request.since, 'since', 'time'));
  const letters = request.letters === null ? null : [...new Map(request.letters.map((l) => {
    const [partition, offset] = l.split('/');
    return [`${Number(partition)}/${BigInt(offset)}`, [Number(partition), BigInt(offset)] as const] as const;
  })).entries()].sort(([, a], [, b]) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0)).map(([text]) => text);
  return { stage: request.stage, workflow: request.workflow, since, letters };
}

/** The request as a checkpoint names it (string fields only). */
export function deadLetterRequestFields(request: DeadLetterReplayRequest): Record<string, string | null> {
  return { stage: request.stage, workflow: request.workflow, since: request.since, letters: request.letters ? request.letters.join(',') : null };
}

/** The name of the direct command's checkpoint for these filters (normalised first). */
export function deadLetterReplayId(request: DeadLetterReplayRequest): string {
  return createHash('sha256').update(JSON.stringify(normalDeadLetterRequest(request))).digest('hex').slice(0, 16);
}

/** The dead letters a filter selects (stage, workflow, and the list of positions when given), decoded. */
export function deadLetterSelector(filter: Omit<DeadLetterReplayRequest, 'since'>, ctx: ReplayContext): (record: LogRecord) => DeadLetter | null {
  // A stage no dead letter can name would select nothing, and say nothing about the typo.
  if (filter.stage !== null && !DEAD_LETTER_STAGES.includes(filter.stage)) throw new ReplayRequestError(`stage takes one of ${DEAD_LETTER_STAGES.join(', ')}`);
  const letters = filter.letters ? new Set(filter.letters) : null;
  return (record) => {
    if (letters && !letters.has(`${record.partition}/${record.offset}`)) return null;
    let letter: DeadLetter;
    try { letter = ctx.codec.decode('DeadLetter', record.value); } catch (error) {
      ctx.skipped?.(`skipped ${recordIdentity(record)}: not a dead letter (${(error as Error).message})`);
      return null;
    }
    if (filter.stage !== null && letter.stage !== filter.stage) return null;
    if (filter.workflow !== null && letter.workflowId !== filter.workflow) return null;
    return letter;
  };
}

/**
 * Append each selected dead letter's source record to the topic it came from (its stage's input), marked as a
 * replay of the source's original position, so the stage runs on it again after a fix: the decoder's, the
 * dispatcher's and the mdn stage's dead letters.
 *
 * One letter per original, across replays (replay-ledger.ts). A request can have several letters: a replay that
 * failed again leaves one for its copy, and a request can fail in the dispatcher and, replayed by a range replay,
 * in the decoder. Each letter's original is its request (originalOf); the first letter of it that a replay
 * selects claims it, and every other letter of it is skipped as a `duplicate`, said, unless it was written after
 * the claiming replay's copy was appended (that copy failed again). A resumed run finds its own claims in the
 * ledger. A letter whose original another replay of this process has claimed but not yet made durable (a named letter
 * its job has not reached, or a batch not yet committed) is held (refeed.ts) until that claim is durable (then it is
 * a duplicate) or let go (then this replay claims it). Nothing is lost by taking the first letter read: letters of one stage name sources with the same key and
 * value, and of letters of two stages the decoder's replay runs both stages again with today's workflows.
 */
export function deadLetterReplayPlan(request: DeadLetterReplayRequest, ctx: ReplayContext, run: ReplayRun): RefeedPlan {
  checkDeadLetterRequest(request);
  const since = request.since === null ? null : parsePosition(request.since, 'since', 'time');
  const stageInputs = replayableInputs(ctx);
  const selected = deadLetterSelector(request, ctx);
  // Each copy's letter, for one the ledger's commit finds another process claimed first.
  const letters = new WeakMap<OutRecord, { at: string; original: string; requestId: string | null }>();
  return {
    requestIdOf: (copy) => requestIdOf(copy.value, ctx.codec),
    source: ctx.topics.deadLetter,
    // Named letters: only the offsets between the first and the last of them are read, not the whole topic.
    ...namedSpan(request.letters, since),
    select: (record) => {
      const letter = selected(record);
      if (!letter) return null;
      if (!stageInputs.has(letter.source.topic)) {
        ctx.skipped?.(`skipped dead letter ${recordIdentity(record)}: its source topic ${letter.source.topic} is no stage input of this pipeline`);
        return null;
      }
      const original = originalOf(letter.source, ctx.codec);
      const position = `${record.partition}/${record.offset}`;
      const verdict = run.ledger.take(original, run.replay, position);
      // Another replay here claimed it and has not made the claim durable yet: if its commit fails or it stops
      // first, nobody would replay this letter, so it is not passed until that claim is durable or let go.
      if (!verdict.replay && verdict.reason === 'duplicate' && verdict.by.ends === null && verdict.by.replay !== run.replay) {
        const held: HeldLetter = { held: `its original, ${original}, is claimed by replay ${verdict.by.replay} with dead letter ${verdict.by.letter}, not yet appended`, at: position, original, by: verdict.by };
        return held;
      }
      if (!verdict.replay) {
        const requestId = requestIdOf(letter.source.value, ctx.codec);
        const why = verdict.reason === 'duplicate' ? duplicateReason(verdict.by, run.replay, run) : ledgerFullReason(run.ledger);
        const advice = verdict.reason === 'duplicate' ? run.advice?.(verdict.by) : null;
        ctx.skipped?.(`skipped dead letter ${recordIdentity(record)}: its original, ${original}, ${why}`);
        const skip: Skip = verdict.reason === 'duplicate'
          ? { skip: 'duplicates', requestId, original, replayedBy: verdict.by.replay, replayedWith: verdict.by.letter, ...(advice ? { advice } : {}) }
          : { skip: 'unrecorded', requestId, original };
        return skip;
      }
      const source = { ...letter.source, key: letter.source.key === null ? null : letter.source.key.toString('utf8') };
      const copy = { topic: source.topic, key: source.key, value: source.value, headers: replayHeaders(source) };
      letters.set(copy, { at: position, original, requestId: requestIdOf(letter.source.value, ctx.codec) });
      return copy;
    },
    // Durable before the copies are, and only this batch's: a crash between the two leaves claims without copies,
    // which the resumed run (its own claims) appends; the other way round would leave copies another replay could
    // append again.
    beforeAppend: async (log, batch) => {
      const ends = Object.fromEntries((await log.endOffsets(ctx.topics.deadLetter)).map((p) => [String(p.partition), p.offset]));
      const lost = await run.ledger.commit(run.replay, batch.flatMap((copy) => letters.get(copy)?.at ?? []), ends);
      if (lost.length === 0) return [];
      // Another process (a second service on this DATA_DIR, the CLI) committed these originals first: its copies stand.
      const by = new Map(lost.map((l) => [l.letter, l.by]));
      return batch.flatMap((copy): Withdrawn[] => {
        const of = letters.get(copy);
        const claim = of && by.get(of.at);
        if (!of || !claim) return [];
        ctx.skipped?.(`skipped dead letter ${ctx.topics.deadLetter}/${of.at}: its original, ${of.original}, ${duplicateReason(claim, run.replay, run)}`);
        return [{ copy, at: of.at, skip: { skip: 'duplicates', requestId: of.requestId, original: of.original, replayedBy: claim.replay, replayedWith: claim.letter } }];
      });
    },
  };
}

/** A dead letter held (refeed.ts `Held`): its place, its original, and the claim it waits for. */
export interface HeldLetter extends Held {
  at: string;
  original: string;
  by: ReplayClaim;
}

/** Whether a plan's choice is a held letter (a replay job shows what it waits on). */
export function isHeldLetter(choice: ReturnType<RefeedPlan['select']>): choice is HeldLetter {
  return choice !== null && 'held' in choice && 'by' in choice;
}

/**
 * Where a read for dead letters starts and stops: for named letters, from the smallest offset named (or `since`)
 * to the largest, inclusive, in every partition (a read starts all partitions at one offset); else from `since`
 * (or the beginning) to the end.
 */
export function namedSpan(letters: string[] | null, since: Position | null): { start: ReadStart; until: Until } {
  if (!letters?.length) return { start: readStart(since), until: null };
  const offsets = letters.map((l) => BigInt(l.split('/')[1]));
  const first = offsets.reduce((a, b) => (a < b ? a : b));
  const last = offsets.reduce((a, b) => (a > b ? a : b));
  return { start: readStart(since ?? { offset: first }), until: { offset: last } };
}

/** Why a letter of an original the ledger has no room for is not replayed, and what to do. */
export function ledgerFullReason(ledger: ReplayLedger): string {
  return `cannot be recorded: the replay ledger is full (${ledger.cap} originals, REPLAY_LEDGER_MAX_ORIGINALS); raise it (restarting the service), then replay this letter`;
}

/** Who replays a letter's original, as its skip says it (with what to do about that replay, when `run` knows). */
export function duplicateReason(by: ReplayClaim, replay: string, run?: Pick<ReplayRun, 'advice'>): string {
  if (by.replay === replay) return `is replayed by this replay with dead letter ${by.letter}`;
  const advice = run?.advice?.(by);
  return `is replayed by replay ${by.replay} with dead letter ${by.letter}${by.ends === null ? ', which runs now' : ''} (a letter that replay's copy left, failing again, may be replayed; this one was there before it)${advice ? `; ${advice}` : ''}`;
}

/** A dead-letter replay run: the ledger it claims originals in, under its own name (a job's id, or a direct run's). */
export interface ReplayRun {
  ledger: ReplayLedger;
  replay: string;
  /** What to do about the replay that claimed an original, when it is one this run cannot finish (a direct run's). */
  advice?(by: ReplayClaim): string | null;
}

/** Refuses a dead-letter replay request that is not sound, in its own words. */
export function checkDeadLetterRequest(request: DeadLetterReplayRequest): void {
  if (request.since !== null) parsePosition(request.since, 'since', 'time');
  if (request.stage !== null && !DEAD_LETTER_STAGES.includes(request.stage)) throw new ReplayRequestError(`stage takes one of ${DEAD_LETTER_STAGES.join(', ')}`);
  if (request.letters && request.letters.some((l) => !/^\d{1,9}\/\d{1,19}$/.test(l))) throw new ReplayRequestError('letters takes dead-letter positions as "<partition>/<offset>", e.g. "0/42"');
  // Nineteen digits reach past Kafka's offsets (a signed 64-bit number): read from there, a replay would send the broker one it cannot take.
  const huge = request.letters?.filter((l) => BigInt(l.split('/')[1]) > MAX_OFFSET) ?? [];
  if (huge.length) throw new ReplayRequestError(`letters names offsets past the largest a log has (${MAX_OFFSET}): ${[...new Set(huge)].join(', ')}`);
}

/** The largest offset of a partition (Kafka's are signed 64-bit numbers). */
export const MAX_OFFSET = 2n ** 63n - 1n;

/**
 * Refuses named letters the dead-letter topic cannot have (`ends`: its partitions' next offsets as of now): in a
 * partition it does not have, or at or past a partition's end. Else a replay of them completes having replayed
 * nothing. A letter below the end that is no dead letter the filters select is only known by reading: the job lists it.
 */
export function checkLettersExist(letters: readonly string[], ends: readonly PartitionOffset[]): void {
  const endOf = new Map(ends.map((p) => [p.partition, BigInt(p.offset)]));
  const missing = [...new Set(letters)].flatMap((l) => {
    const [partition, offset] = [Number(l.split('/')[0]), BigInt(l.split('/')[1])];
    const end = endOf.get(partition);
    if (end === undefined) return [`${l} (the topic has no partition ${partition}: it has ${[...endOf.keys()].sort((a, b) => a - b).join(', ')})`];
    return offset >= end ? [`${l} (partition ${partition} ${end === 0n ? 'is empty' : `holds offsets below ${end}`})`] : [];
  });
  if (missing.length) throw new ReplayRequestError(`letters names dead letters the dead-letter topic does not have: ${missing.join('; ')}`);
}

/**
 * The topics a dead letter's source is replayed into. The sampler's source, an execution queue, is left out:
 * re-feeding it would request those executions again. The mdn stage's are in: a delivery replayed is sent once
 * more, as any MDN retry can be, unless its evidence shows that attempt delivered (as2-async-mdn.md).
 */
export function replayableInputs(ctx: ReplayContext): Set<string> {
  return new Set([ctx.topics.received, ctx.topics.decoded, ctx.topics.mdnDeliveries, ...ctx.topics.mdnRetries]);
}

/**
 * What a dead letter replays, one per replay: the request, when its source is one of ours (a received or decoded
 * record), since an execution is named by its request id and item, whichever stage or copy failed; else (an MDN
 * delivery) the original record its source is, or replays.
 */
export function originalOf(source: DeadLetter['source'], codec: AvroCodec): string {
  // Only these: an MDN delivery's request is also its decoder's and dispatcher's (whose replay sends no MDN),
  // and an execution request is one of several items of its request.
  const requestId = isRequestRecord(source.value, codec) ? requestIdOf(source.value, codec) : null;
  return requestId !== null ? `request ${requestId}` : replayOf(source.headers) ?? recordIdentity(source);
}

function isRequestRecord(value: Buffer, codec: AvroCodec): boolean {
  try {
    const name = codec.nameOf(value);
    return name === 'Received' || name === 'Decoded';
  } catch {
    return false;
  }
}

/** One dead letter as the CLI prints it and the API answers it: where it sits, why it failed, which request. */
export function deadLetterSummary(record: LogRecord, letter: DeadLetter, codec: AvroCodec, withSource: boolean): Record<string, unknown> {
  const line: Record<string, unknown> = {
    stage: letter.stage, code: letter.errorCode, message: letter.message, attempts: letter.attempts,
    failedAt: new Date(letter.failedAt).toISOString(), workflowId: letter.workflowId, requestId: requestIdOf(letter.source.value, codec),
    partition: record.partition, offset: record.offset, source: recordIdentity(letter.source),
    // A source that is a replayed copy (a replay that failed again): the original it replays, as its letter's replay would name it.
    replayOf: replayOf(letter.source.headers),
  };
  if (withSource) line.sourceRecord = { key: letter.source.key?.toString('utf8') ?? null, headers: letter.source.headers, value: letter.source.value.toString('base64') };
  return line;
}

