import { SpanStatusCode } from '@opentelemetry/api';
import type { AvroCodec } from '../platform/avro/codec';
import type { MdnAttempt, MdnDelivery, MdnOutcome, MdnOutcomeKind } from '../platform/avro/records';
import type { As2MdnRetrySettings } from '../platform/config/config';
import { crashedLetter, failureFields, withDeadLettering, type DeadLetteringOptions } from '../platform/log/dead-lettering';
import type { CrashMarks } from '../platform/log/crash-guard';
import { withCrashGuard } from '../platform/log/crash-guarded';
import { eachRecord } from '../platform/log/stage-batch';
import { startTogether } from '../platform/log/start-together';
import type { EventLog, LogRecord, OutRecord, StageBatchHandler, StageHandle } from '../platform/log/event-log';
import type { PipelineTopics } from '../platform/log/topics';
import type { RecordKeyMode } from '../platform/log/record-keys';
import type { Logger } from '../platform/logger/logger';
import { guardedPost, type GuardedPostOptions, type GuardedPostResult } from '../platform/net/guarded-post';
import { loggableUrl } from '../platform/net/url-allow-list';
import { ObjectStoreError, readObject, type ObjectStore } from '../platform/store/object-store';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import { contextFromHeaders, inConsumerSpan, spanTraceHeaders, stageSpanAttributes, traceHeaders } from '../platform/telemetry/trace-context';
import { evidenceFolder, splitEntity } from '../triggers/as2/evidence';
import { dueGate, NotDue, Stopping } from './due-gate';

/**
 * Stage 5, AS2 asynchronous MDNs (RFC 4130 §7.3, docs/as2-async-mdn.md): POSTs each MdnDelivery the decoder
 * wrote to its URL. A failed attempt writes the delivery again, to the retry topic of the next delay (30 s,
 * 5 min, then 30 min, repeated: AS2_MDN_RETRY_DELAYS), until the next attempt would fall after the retry
 * window (AS2_MDN_RETRY_HOURS from the accept): then it gives up. Each attempt also writes an MdnOutcome, in
 * the same atomic output as its retry record, and the attempts so far to `mdn-delivery.json` beside the MDN's
 * evidence; a delivery the crash guard dead-letters writes one beside its dead letter (`dead_lettered`). The
 * POST is a side effect no transaction covers. The evidence, written before the commit, is read before each
 * attempt, so an attempt that was delivered and not committed (fenced, frozen, killed after the write) is not made
 * again (deliveredBefore); one that ends between the POST and that write sends the same MDN (same bytes, same
 * Message-ID) again. Delivery is at least once.
 */
export interface MdnStageDeps {
  log: EventLog;
  topics: PipelineTopics;
  codec: AvroCodec;
  store: ObjectStore;
  logger: Logger;
  metrics?: IngressMetrics;
  retry: As2MdnRetrySettings;
  recordKey: RecordKeyMode;
  /**
   * Whether the delivery's allow-list entry is still listed now (allowListEntryListed); absent, the recorded
   * entry is trusted as it was at the accept.
   */
  stillAllowed?: (delivery: MdnDelivery) => Promise<boolean>;
  /** Connection bounds and extra trust anchors of the POST (defaults: DEFAULT_POST). */
  post?: Partial<Pick<GuardedPostOptions, 'connectTimeoutMs' | 'responseTimeoutMs' | 'maxResponseBytes' | 'ca'>>;
  now?: () => number;
  /**
   * Where the stage marks the deliveries in hand after a start, so that one that ends the process is found and
   * dead-lettered `stage-crashed` (crash-guard.ts); by input topic, under its group.
   */
  crashMarks?: CrashMarks;
}

/** The reason of a delivery's `dead_lettered` outcome: its dead letter's code first, as operators search for it. */
export const STAGE_CRASHED_REASON = 'stage-crashed: the process ended each time this delivery was in hand; dead-lettered without another attempt (dead-letters replay --stage mdn sends it again, unless its evidence shows it delivered)';

export const DEFAULT_POST = { connectTimeoutMs: 10_000, responseTimeoutMs: 20_000, maxResponseBytes: 64 * 1024 };

/** `as2/<workflowId>/<message id>/<requestId>/mdn-delivery.json`: the attempts, next to the MDN they delivered. */
export function deliveryEvidencePath(delivery: Pick<MdnDelivery, 'workflowId' | 'messageId' | 'requestId'>): string {
  return `${evidenceFolder(delivery.workflowId, delivery.messageId, delivery.requestId)}/mdn-delivery.json`;
}

export function mdnGroup(topics: PipelineTopics, input: string): string {
  return input === topics.mdnDeliveries ? topics.group('mdn') : topics.group('mdn', input);
}

export async function startMdnStage(deps: MdnStageDeps): Promise<StageHandle> {
  const { codec, topics, logger } = deps;
  const now = deps.now ?? Date.now;
  const gate = dueGate(now);
  const post = { ...DEFAULT_POST, ...deps.post };

  /**
   * An append reported failed may still have reached the log: the receiver then answered a failure MDN and
   * kept it as this request's `mdn` evidence (evidence.ts), and the recorded processed MDN must never go out.
   * Checked before every attempt (a store that cannot be read makes a failed attempt, retried as any other);
   * an `mdn` that is absent (the decode failed before keeping it) or the recorded one lets the delivery go on.
   */
  async function answeredFailure(delivery: MdnDelivery): Promise<boolean> {
    const kept = await readIfAny(`${evidenceFolder(delivery.workflowId, delivery.messageId, delivery.requestId)}/mdn`);
    return kept !== null && splitEntity(kept).headers['message-id'] !== delivery.mdnMessageId;
  }

  /** An evidence object, or null where there is none: one request (a get that may find nothing), not a head and a get. */
  async function readIfAny(path: string): Promise<Buffer | null> {
    try {
      return await readObject(deps.store, path);
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === 'not-found') return null;
      throw error;
    }
  }

  /** `final`: no later attempt could succeed. */
  async function attempt(delivery: MdnDelivery): Promise<GuardedPostResult & { final?: true }> {
    let failed: boolean;
    try {
      failed = await answeredFailure(delivery);
    } catch (error) {
      logger.warn('AS2 MDN evidence could not be read before a delivery attempt', { requestId: delivery.requestId, workflowId: delivery.workflowId, error });
      return { ok: false, status: null, reason: 'not attempted: the evidence store could not be read to check what this request was answered' };
    }
    if (failed) {
      return { ok: false, status: null, reason: 'not sent: the receiver answered this request with a failure MDN (its accept was reported failed), so its processed MDN must not go out', final: true };
    }
    if (deps.stillAllowed) {
      let listed: boolean;
      try {
        listed = await deps.stillAllowed(delivery);
      } catch (error) {
        logger.warn('the asynchronous MDN allow-list could not be read before a delivery attempt', { requestId: delivery.requestId, workflowId: delivery.workflowId, error });
        return { ok: false, status: null, reason: 'not attempted: the workflow or its credential could not be read to check the allow-list' };
      }
      if (!listed) {
        return { ok: false, status: null, reason: `not sent: the allow-list entry ${delivery.allowedBy} is no longer on the workflow's or its credential's asyncMdnUrls`, final: true };
      }
    }
    let target: URL;
    let entry: URL;
    try { target = new URL(delivery.url); entry = new URL(delivery.allowedBy); } catch { return { ok: false, status: null, reason: 'the recorded URL or allow-list entry is not a URL' }; }
    const { headers, body } = splitEntity(delivery.mdn);
    return guardedPost({ url: target, allowedBy: entry, headers, body, ...post });
  }

  async function keepEvidence(delivery: MdnDelivery, outcome: MdnOutcomeKind, attempts: (MdnAttempt & { outcome: MdnOutcomeKind })[], nextAttemptAt: number | null): Promise<void> {
    const document = {
      url: loggableUrl(delivery.url), mdnMessageId: delivery.mdnMessageId, outcome, nextAttemptAt: nextAttemptAt === null ? null : new Date(nextAttemptAt).toISOString(),
      attempts: attempts.map((a) => ({ at: new Date(a.at).toISOString(), outcome: a.outcome, status: a.status, reason: a.reason || null })),
    };
    // A failed attempt does not write over the evidence of this attempt delivered by another process (a frozen one
    // thawed, its successor having delivered meanwhile): that evidence decides whether the MDN is sent again.
    if (outcome !== 'delivered' && await deliveredBefore({ ...delivery, attempts: attempts.slice(0, -1) })) return;
    // After the POST: a store that fails must not make us send the MDN again. The outcome record has it all.
    await deps.store.put(deliveryEvidencePath(delivery), Buffer.from(JSON.stringify(document, null, 2)), { contentType: 'application/json' })
      .catch((error: Error) => logger.error('AS2 MDN delivery evidence could not be stored', { requestId: delivery.requestId, workflowId: delivery.workflowId, error }));
  }

  /**
   * This very attempt, already made and delivered, as `mdn-delivery.json` says: its handling went no further than
   * keeping that evidence before its output was committed (a commit fenced after a rebalance, a process frozen or
   * killed after the store's write). The MDN is not sent again; the outcome is written from what the evidence
   * records. Null when it says otherwise, is absent or cannot be read: then the attempt is made (at least once).
   */
  async function deliveredBefore(delivery: MdnDelivery): Promise<{ ok: true; status: number | null; at: number } | null> {
    let text: string;
    try {
      const kept = await readIfAny(deliveryEvidencePath(delivery));
      if (kept === null) return null;
      text = kept.toString('utf8');
    } catch (error) {
      logger.warn('AS2 MDN delivery evidence could not be read before an attempt: the attempt is made', { requestId: delivery.requestId, workflowId: delivery.workflowId, error });
      return null;
    }
    let document: { outcome?: unknown; mdnMessageId?: unknown; attempts?: Array<{ at?: unknown; status?: unknown }> };
    try { document = JSON.parse(text) as typeof document; } catch { return null; }
    const attempts = Array.isArray(document.attempts) ? document.attempts : [];
    const last = attempts.at(-1);
    if (document.outcome !== 'delivered' || document.mdnMessageId !== delivery.mdnMessageId || attempts.length !== delivery.attempts.length + 1 || !last) return null;
    const at = typeof last.at === 'string' ? Date.parse(last.at) : NaN;
    return Number.isFinite(at) ? { ok: true, status: typeof last.status === 'number' ? last.status : null, at } : null;
  }

  const deadLettering: DeadLetteringOptions = { stage: 'mdn', topic: topics.deadLetter, codec, logger, metrics: deps.metrics, recordKey: deps.recordKey };
  // By input topic: the first attempts' and each retry delay's have a group of their own.
  const spanAttributes = new Map([topics.mdnDeliveries, ...topics.mdnRetries].map((topic) => [topic, stageSpanAttributes(deps.log.kind, topic, mdnGroup(topics, topic))]));
  /**
   * Each delivery is handled in a span of the request's trace, from the trace context the decoder wrote on it, and
   * its outcome and retry records carry that span's: the journal's `mdn-*` entries and every later attempt stay in
   * the trace. The POST is a CLIENT span under it that tells the partner nothing of it (guarded-post.ts).
   */
  const deliver = withDeadLettering((record: LogRecord): Promise<OutRecord[]> => inConsumerSpan(`${record.topic} process`, record.headers, spanAttributes.get(record.topic) ?? {}, async (span) => {
    const delivery = codec.decode('MdnDelivery', record.value);
    span.setAttributes({ 'workflow.id': delivery.workflowId, 'ingress.request_id': delivery.requestId, 'as2.message_id': delivery.messageId, 'ingress.mdn.attempt': delivery.attempts.length + 1 });
    const before = await deliveredBefore(delivery);
    const result = before ?? await attempt(delivery);
    const at = before?.at ?? now();
    const history = [...delivery.attempts, { at, status: result.status, reason: result.ok ? '' : result.reason }];
    const retryIndex = Math.min(history.length - 1, topics.mdnRetries.length - 1);
    const nextAttemptAt = result.ok ? null : at + deps.retry.delaysMs[retryIndex];
    const kind: MdnOutcomeKind = result.ok ? 'delivered' : result.final || nextAttemptAt! > delivery.receivedAt + deps.retry.windowMs ? 'given_up' : 'retrying';
    const outcome: MdnOutcome = {
      // The query, which may hold the partner's token, stays in the delivery record alone (security.md).
      requestId: delivery.requestId, workflowId: delivery.workflowId, messageId: delivery.messageId, mdnMessageId: delivery.mdnMessageId, url: loggableUrl(delivery.url),
      outcome: kind, attempts: history.length, at, status: result.status, reason: result.ok ? null : result.reason, nextAttemptAt: kind === 'retrying' ? nextAttemptAt : null,
    };
    // A failed attempt is an error of this span, whether it is retried or given up; one found delivered is not.
    if (!result.ok) span.setStatus({ code: SpanStatusCode.ERROR, message: result.reason });
    span.setAttribute('ingress.outcome', kind);
    const fields = {
      event: `as2.mdn-${kind === 'given_up' ? 'given-up' : kind}`, workflowId: delivery.workflowId, messageId: delivery.messageId, requestId: delivery.requestId,
      mdnMessageId: delivery.mdnMessageId, url: loggableUrl(delivery.url), attempts: history.length, status: result.status,
      ...(result.ok ? {} : { reason: result.reason }), ...(kind === 'retrying' ? { nextAttemptAt: new Date(nextAttemptAt!).toISOString() } : {}),
    };
    if (before) {
      // Counted when it was made; said again only for what this process did: no POST.
      logger.info(fields.event, { ...fields, sentBefore: true });
    } else {
      if (kind === 'delivered') logger.info(fields.event, fields);
      else logger.warn(fields.event, fields);
      deps.metrics?.mdnDelivery(kind);
    }
    const outcomes = history.map((a, i) => ({ ...a, outcome: (i === history.length - 1 ? kind : 'retrying') as MdnOutcomeKind }));
    if (!before) await keepEvidence(delivery, kind, outcomes, outcome.nextAttemptAt);
    const headers = spanTraceHeaders(span);
    const out: OutRecord[] = [{ topic: topics.mdnOutcomes, key: record.key, value: codec.encode('MdnOutcome', outcome), headers }];
    if (kind === 'retrying') {
      const retry: MdnDelivery = { ...delivery, dueAt: nextAttemptAt!, attempts: history };
      out.push({ topic: topics.mdnRetries[retryIndex], key: record.key, value: codec.encode('MdnDelivery', retry), headers });
    }
    return out;
  }), deadLettering);

  const due = async (record: LogRecord): Promise<void> => {
    let dueAt: number | null = null;
    try { dueAt = codec.decode('MdnDelivery', record.value).dueAt; } catch { /* dead-lettered by deliver */ }
    if (dueAt !== null) await gate.wait(record, dueAt);
  };
  const handle = async (record: LogRecord): Promise<OutRecord[]> => {
    await due(record);
    return deliver(record);
  };

  /**
   * A delivery the crash guard convicted: its dead letter, and an MdnOutcome `dead_lettered` beside it, so that
   * the journal and dashboards see the delivery end as they see one given up. Both are made from the record alone:
   * the allow-list check, the store and the POST do not run again. Two things an attempt runs do: decoding it (the
   * due wait decoded it before the guard took the batch) and parsing its URL (`loggableUrl`'s `new URL`, which
   * catches a failure): the receiver parsed that URL when it accepted the message and recorded the parse's href.
   * Not an attempt, so not in `ingress.as2.mdn_deliveries` (its dead letter is counted); `mdn-delivery.json` stays
   * as the last attempt that came back left it. A record that does not decode has its dead letter alone.
   */
  function crashed(record: LogRecord): OutRecord[] {
    const letter = crashedLetter(record, deadLettering);
    let delivery: MdnDelivery;
    try {
      delivery = codec.decode('MdnDelivery', record.value);
    } catch {
      return letter;
    }
    const outcome: MdnOutcome = {
      requestId: delivery.requestId, workflowId: delivery.workflowId, messageId: delivery.messageId, mdnMessageId: delivery.mdnMessageId, url: loggableUrl(delivery.url),
      outcome: 'dead_lettered', attempts: delivery.attempts.length, at: now(), status: null, reason: STAGE_CRASHED_REASON, nextAttemptAt: null,
    };
    logger.warn('as2.mdn-dead-lettered', {
      event: 'as2.mdn-dead-lettered', workflowId: delivery.workflowId, messageId: delivery.messageId, requestId: delivery.requestId,
      mdnMessageId: delivery.mdnMessageId, url: outcome.url, attempts: outcome.attempts, status: null, reason: STAGE_CRASHED_REASON,
    });
    // The input's trace context as it came: no span of this stage handled the delivery.
    return [...letter, { topic: topics.mdnOutcomes, key: record.key, value: codec.encode('MdnOutcome', outcome), headers: traceHeaders(contextFromHeaders(record.headers)) }];
  }

  /**
   * The deliveries of one input under the crash guard. The head of a batch waits for its due time before the
   * guard takes the batch: a delivery waiting (up to half an hour on a retry topic, a bounded sleep at a time) is
   * not in hand, so it writes no mark, takes no turn from the thread's other stages while they narrow a crash
   * down, and an end of the process meanwhile is no strike against it. A later record of the batch that is not
   * due fails at once (NotDue), and is the head of the next batch. Only failures of the POST's attempt are
   * dead-lettered record by record (deliver): a wait is retried as ever, whatever its count.
   */
  function guarded(marks: CrashMarks, group: string): StageBatchHandler {
    const handleBatch = withCrashGuard((records, budget) => eachRecord(records, budget, handle), { marks, group, stage: 'mdn', logger, crashed });
    // Partitions whose first batch since owning them waited: the guard is told when it takes the next one.
    const owed = new Set<number>();
    return async (records, budget) => {
      if (records.length === 0) return handleBatch(records, budget);
      const { partition } = records[0];
      if (budget.firstSinceOwned) owed.add(partition);
      try {
        await due(records[0]);
      } catch (error) {
        return { outputs: [], failure: { index: 0, error } };
      }
      return handleBatch(records, { ...budget, firstSinceOwned: owed.delete(partition) });
    };
  }

  function runInput(topic: string): Promise<StageHandle> {
    const group = mdnGroup(topics, topic);
    return deps.log.runStage({
      group, topic, ...(deps.crashMarks ? { handleBatch: guarded(deps.crashMarks, group) } : { handle }),
      onRetry: (error, rec, attempt) => {
        // Waiting for a due time is not a failure: the back-off brings the record back, and the gate then sleeps.
        if (error instanceof NotDue || error instanceof Stopping) logger.debug('mdn stage waits for a due time', { topic, offset: rec?.offset ?? null, reason: error.message });
        else logger.warn('mdn stage retrying', { topic, attempt, offset: rec?.offset ?? null, error, ...failureFields(rec, error, codec) });
      },
    });
  }

  // Each input's group joins at once, not after the one before (start-together.ts).
  let stages: StageHandle[];
  try {
    stages = await startTogether([topics.mdnDeliveries, ...topics.mdnRetries].map((topic) => () => runInput(topic)));
  } catch (error) {
    gate.stop();
    throw error;
  }
  return {
    async stop() {
      gate.stop();
      await Promise.all(stages.map((s) => s.stop()));
    },
    notReady: () => stages.map((s) => s.notReady()).find((reason) => reason !== null) ?? null,
  };
}
