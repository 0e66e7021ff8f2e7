import { Readable } from 'node:stream';
import type { AvroCodec } from '../platform/avro/codec';
import type { Received } from '../platform/avro/records';
import { MAX_RECORD_BYTES, type EventLog, type LogRecord, type OutRecord, type StageBatchBudget, type StageHandle } from '../platform/log/event-log';
import { failureFields, StageInputError, withDeadLetteringBatch } from '../platform/log/dead-lettering';
import type { CrashMarks } from '../platform/log/crash-guard';
import { eachRecord } from '../platform/log/stage-batch';
import { carryReplayMark, replayOf } from '../platform/log/replay-marking';
import { IDEMPOTENCY_HEADER, idempotencyIdentity, recordKey, type RecordKeyMode } from '../platform/log/record-keys';
import { idempotencyLedger, repeats, type KeyedAccept } from './idempotency-ledger';
import { receivedKeysReader } from './received-keys';
import type { PipelineTopics } from '../platform/log/topics';
import type { Logger } from '../platform/logger/logger';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import type { CredentialDocument, WorkflowDocument } from '../platform/registry/documents';
import { readObject, type ObjectStore } from '../platform/store/object-store';
import { contextFromHeaders, inConsumerSpan, spanTraceHeaders, stageSpanAttributes, traceHeaders } from '../platform/telemetry/trace-context';
import type { TriggerCatalog } from '../triggers/catalog';
import type { DecodeServices } from '../triggers/trigger';
import { mdnDeliveryOf } from '../triggers/as2/async-mdn';

/**
 * Stage 2: received → decoded. Fetches the body (inline or claim check), asks the trigger plugin for
 * its items, and produces one Decoded record. The node's options are read from the workflow as it is
 * now, so a replay after a fix uses the fixed workflow.
 */
export interface DecoderDeps {
  log: EventLog;
  topics: PipelineTopics;
  codec: AvroCodec;
  store: ObjectStore;
  /**
   * Workflows, usually through a TTL cache (ttl-cache.ts); `fresh` reads the registry itself. The receiver
   * caches workflows too, so a record may name a trigger node (renamed, added) that a document cached here
   * before the change lacks: that record is checked against `fresh` before it is called permanent.
   */
  workflows: { get(id: string): Promise<WorkflowDocument | null>; fresh(id: string): Promise<WorkflowDocument | null> };
  catalog: TriggerCatalog;
  /** Credentials, for kinds whose decode opens the body again (AS2). */
  credential?(id: string): Promise<CredentialDocument | null>;
  logger: Logger;
  metrics?: IngressMetrics;
  /** What the decoded record is keyed by (RECORD_KEY, record-keys.ts). */
  recordKey: RecordKeyMode;
  /** The longest idempotency window a node may use (IDEMPOTENCY_MAX_WINDOW_HOURS); longer ones are cut to it. */
  idempotencyLookbackMs: number;
  /** From the received record's append to an asynchronous MDN's first attempt (AS2_MDN_FIRST_ATTEMPT_DELAY; async-mdn.ts). */
  mdnFirstAttemptDelayMs: number;
  /** Where the stage marks the records in hand after a start, so that one that ends the process is found (crash-guard.ts). */
  crashMarks?: CrashMarks;
}

/**
 * The keyed accept a received record is, with the window its node had when the receiver accepted it (the
 * record's IDEMPOTENCY_HEADER), cut to the lookback the ledger can recover; null when it has no key.
 */
function acceptOf(received: Received, headers: Record<string, string>, lookbackMs: number): KeyedAccept | null {
  const window = Number(headers[IDEMPOTENCY_HEADER]);
  if (!received.idempotencyKey || !(window > 0)) return null;
  return { identity: idempotencyIdentity(received.workflowId, received.idempotencyKey), requestId: received.requestId, receivedAt: received.receivedAt, windowMs: Math.min(window, lookbackMs) };
}

export function bodyServices(store: ObjectStore, logger: Logger, credential?: DecodeServices['credential']): DecodeServices {
  const openBody = async (received: Received): Promise<Readable> =>
    received.body.kind === 'inline' ? Readable.from([received.body.data]) : store.get(received.body.path);
  return {
    store,
    logger,
    credential,
    openBody,
    async readBody(received, maxBytes) {
      if (received.body.kind === 'inline') return received.body.data;
      if (received.body.size > maxBytes) throw new StageInputError('body-too-large-to-decode', `body of ${received.body.size} bytes exceeds ${maxBytes}`);
      return readObject(store, received.body.path);
    },
  };
}

export async function startDecoder(deps: DecoderDeps): Promise<StageHandle> {
  const { codec, catalog, logger, topics } = deps;
  const services = bodyServices(deps.store, logger, deps.credential);
  const ledger = idempotencyLedger({
    lookbackMs: deps.idempotencyLookbackMs,
    readBack: receivedKeysReader({ log: deps.log, topic: topics.received, logger, acceptOf: (record) => acceptOf(codec.decode('Received', record.value), record.headers, deps.idempotencyLookbackMs) }),
  });
  const spanName = `${topics.received} process`;
  const spanAttributes = stageSpanAttributes(deps.log.kind, topics.received, topics.group('decoder'));
  /**
   * The asynchronous MDN delivery (AS2, services/mdn/) a received record owes, or null: it goes out with the
   * decoded record, or with the dead letter, in the same atomic output. The message was answered `processed`
   * either way, so its MDN is owed either way. A replay (ingress replay, dead-letters replay) owes none: its
   * original already wrote one.
   */
  const owedDelivery = (record: LogRecord, received: Received, headers: Record<string, string>): OutRecord | null => {
    const delivery = replayOf(record.headers) === null ? mdnDeliveryOf(received, record.timestamp, deps.mdnFirstAttemptDelayMs) : null;
    return delivery && { topic: topics.mdnDeliveries, key: recordKey(deps.recordKey, received), value: codec.encode('MdnDelivery', delivery), headers };
  };
  /**
   * One received record; `workflowOf` reads each workflow once per batch. `deliveries` holds the delivery it owes
   * (owedDelivery), by the input record itself.
   */
  const decodeRecord = (record: LogRecord, workflowOf: (id: string, fresh: boolean) => Promise<WorkflowDocument | null>, deliveries: WeakMap<LogRecord, OutRecord>) =>
    inConsumerSpan(spanName, record.headers, spanAttributes, async (span): Promise<OutRecord[]> => {
      const received = codec.decode('Received', record.value);
      // First: a span that fails early (the ledger's read-back) still says whose record it was.
      span.setAttributes({ 'workflow.id': received.workflowId, 'ingress.request_id': received.requestId });
      if (received.as2) span.setAttribute('as2.message_id', received.as2.messageId);
      const replay = replayOf(record.headers);
      // Two spans of one trace, the first run's and a replay's, are told apart by it.
      if (replay !== null) span.setAttribute('ingress.replay_of', replay);
      const key = recordKey(deps.recordKey, received);
      const mdnOut = owedDelivery(record, received, spanTraceHeaders(span));
      if (mdnOut) deliveries.set(record, mdnOut);
      const accept = acceptOf(received, record.headers, deps.idempotencyLookbackMs);
      // Before anything can fail: every keyed record counts, whatever becomes of it (idempotency-ledger.ts).
      const earlier = await ledger.observe(record.partition, record.offset, accept);
      const trigger = (workflow: WorkflowDocument | null) => {
        const node = workflow?.nodes.find((n) => n.name === received.triggerNode);
        const plugin = node ? catalog.pluginFor(node.type) : null;
        return node && plugin ? { node, plugin } : null;
      };
      const found = trigger(await workflowOf(received.workflowId, false)) ?? trigger(await workflowOf(received.workflowId, true));
      if (!found) throw new StageInputError('trigger-missing', `workflow ${received.workflowId} has no trigger node "${received.triggerNode}" any more`);
      const { node, plugin } = found;
      const duplicateOf = accept ? repeats(earlier, accept) : null;
      if (duplicateOf !== null) {
        span.setAttribute('ingress.duplicate_of', duplicateOf);
        deps.metrics?.duplicate(received.workflowId);
        logger.info('request repeats an accepted idempotency key: no execution requested', { requestId: received.requestId, workflowId: received.workflowId, duplicateOf });
      }
      const items = duplicateOf === null ? await plugin.decode(received, node, services) : [];
      const value = codec.encode('Decoded', {
        requestId: received.requestId, workflowId: received.workflowId, triggerNode: received.triggerNode,
        triggerKind: received.triggerKind, pathSuffix: received.pathSuffix, receivedAt: received.receivedAt, items, duplicateOf,
      });
      if (value.length > MAX_RECORD_BYTES) {
        throw new StageInputError('output-too-large', `the decoded output is ${value.length} bytes, over the ${MAX_RECORD_BYTES}-byte record limit; Raw Body stores such a body as a file instead`);
      }
      const decoded = { topic: topics.decoded, key, value, headers: carryReplayMark(record.headers, spanTraceHeaders(span)) };
      return mdnOut ? [decoded, mdnOut] : [decoded];
    });
  /**
   * The deliveries owed by the records of the batches in hand, keyed by the record objects themselves: on Kafka
   * the batches of several partitions are handled at once, and a batch of a partition handed out again may run
   * beside a stale one of the same offsets. One map, and one dead-lettering wrapper for the stage's whole life:
   * the wrapper counts a record's attempts across batches, so a record that keeps failing is dead-lettered after
   * its last attempt rather than retried for ever.
   */
  const deliveries = new WeakMap<LogRecord, OutRecord>();
  const decodeBatch = withDeadLetteringBatch((records, budget) => {
    // The documents this batch has read: a workflow's records share one look-up (and one fresh read, when a
    // record names a trigger node the cached document lacks).
    const read = new Map<string, WorkflowDocument | null>();
    const workflowOf = async (id: string, fresh: boolean) => {
      if (!fresh && read.has(id)) return read.get(id)!;
      const workflow = fresh ? await deps.workflows.fresh(id) : await deps.workflows.get(id);
      read.set(id, workflow);
      return workflow;
    };
    return eachRecord(records, budget, (record) => decodeRecord(record, workflowOf, deliveries));
  }, { stage: 'decoder', topic: topics.deadLetter, codec, logger, metrics: deps.metrics, recordKey: deps.recordKey, crashMarks: deps.crashMarks && { marks: deps.crashMarks, group: topics.group('decoder') } });
  /**
   * The ledger's read-backs for a batch, before its crash-guarded handling (decodeBatch): inside it, the first
   * keyed record of a partition after a start would be in hand for the whole of its partition's read-back, and
   * three process deaths in a row within that window (an OOM loop at start, a probe that kills too early) would
   * dead-letter it stage-crashed, never handled. For each partition with a keyed record, its records up to the
   * first keyed one are settled here as observe would settle them, so observe then reads nothing.
   * A read-back that fails (its patience ran out, the log is unavailable) throws out of handleBatch: both logs
   * then retry the batch after a back-off with nothing committed, and it is still the partition's first since
   * owned, so the crash guard still checks it. Returned as a record's failure instead, it would be logged with an
   * offset but make the retry a steady batch that the guard does not check.
   */
  async function prepareLedger(records: LogRecord[]): Promise<void> {
    let keyed: Set<number> | null = null;
    for (const record of records) if (record.headers[IDEMPOTENCY_HEADER] !== undefined) (keyed ??= new Set()).add(record.partition);
    if (!keyed) return; // an unkeyed batch: nothing to read back
    for (const record of records) {
      if (!keyed.has(record.partition)) continue;
      if (record.headers[IDEMPOTENCY_HEADER] === undefined) {
        await ledger.prepare(record.partition, record.offset, null);
        continue;
      }
      let decodes = true;
      // Decoded only when the ledger needs its receivedAt (a read-back is due): never in the steady state.
      const receivedAt = () => {
        let received: Received;
        try {
          received = codec.decode('Received', record.value);
        } catch {
          decodes = false; // the dead-lettering wrapper's business: observe never sees it, so prepare skips it
          return null;
        }
        return acceptOf(received, record.headers, deps.idempotencyLookbackMs)?.receivedAt ?? null;
      };
      if (await ledger.prepare(record.partition, record.offset, receivedAt)) keyed.delete(record.partition);
      else if (decodes) await ledger.prepare(record.partition, record.offset, null); // the header, but no key
    }
  }
  const handleBatch = async (records: LogRecord[], budget: StageBatchBudget) => {
    await prepareLedger(records);
    const result = await decodeBatch(records, budget);
    for (let i = 0; i < result.outputs.length; i++) {
      // A delivery owed by a record that was dead-lettered goes out with its dead letter; one that never reached
      // decodeRecord (dead-lettered stage-crashed, unhandled) works it out here.
      const owed = deliveries.get(records[i]) ?? (result.outputs[i].some((out) => out.topic === topics.deadLetter) ? deliveryOfLetter(records[i]) : null);
      if (owed && !result.outputs[i].includes(owed)) result.outputs[i] = [...result.outputs[i], owed];
    }
    return result;
  };
  const deliveryOfLetter = (record: LogRecord): OutRecord | null => {
    let received: Received;
    try {
      received = codec.decode('Received', record.value);
    } catch {
      return null; // a record that does not decode names no MDN to send
    }
    // The input's trace context as it came: no span of this stage handled the record.
    return owedDelivery(record, received, traceHeaders(contextFromHeaders(record.headers)));
  };
  return deps.log.runStage({
    group: topics.group('decoder'), topic: topics.received, handleBatch,
    onRetry: (error, rec, attempt) => logger.warn('decoder retrying', { attempt, offset: rec?.offset ?? null, key: rec?.key ?? null, error, ...failureFields(rec, error, codec) }),
  });
}
