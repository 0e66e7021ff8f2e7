import type { AvroCodec } from '../platform/avro/codec';
import type { Received } from '../platform/avro/records';
import { requestIdOf } from '../platform/avro/request-id';
import type { LogRecord } from '../platform/log/event-log';
import type { PipelineTopics } from '../platform/log/topics';
import { recordIdentity, replayOf } from '../platform/log/replay-marking';
import { journalKey, type JournalEntryKind } from '../platform/registry/journal';
import { searchKeysOf } from './search-keys';
import { loggableUrl } from '../platform/net/url-allow-list';

/**
 * What the journal stage reads, and which entries each record makes: one row per source topic. A new
 * source (asynchronous MDN delivery outcomes: "MDN delivered / retrying / given up") is a new row naming its
 * topic and mapping its record to entries; the stage, the store and the queries stay as they are.
 */
export interface JournalSourceContext {
  codec: AvroCodec;
  topics: PipelineTopics;
  /** Every distinct execution queue. */
  queues: readonly string[];
}

/** An entry before the stage gives it its id, source position and trace id (journal-stage.ts). */
export interface EntryDraft {
  requestId: string;
  workflowId: string | null;
  kind: JournalEntryKind;
  at: number;
  detail: Record<string, unknown>;
  keys?: string[];
  /** Where the trace id comes from when the record's own headers carry none. */
  traceparent?: string | null;
  /** Overrides the replay mark of the record's headers (a dead letter's is its source's). */
  replayOf?: string | null;
}

export interface JournalSource {
  /** For logs. */
  name: string;
  topics(context: Pick<JournalSourceContext, 'topics' | 'queues'>): string[];
  /** The stage that reads these topics: a replayed copy appended to one re-ran that stage. */
  readBy: string | null;
  /**
   * The entries one record makes. `replayCopy`: the record is a copy that `ingress replay` or
   * `dead-letters replay` appended to this very topic, so it stands for the stage re-running, not for a new
   * request. Throwing an AvroDecodeError (or any error of the record) skips the record, with a log line.
   */
  entries(record: LogRecord, context: JournalSourceContext, replayCopy: boolean): EntryDraft[];
}

/** The Disposition field of an MDN as sent (its text is in the clear, signed or not). */
const DISPOSITION = /^Disposition:[ \t]*(.+?)\r?$/im;
export function dispositionOf(mdn: Buffer): string | null {
  return DISPOSITION.exec(mdn.toString('latin1'))?.[1].trim() ?? null;
}

const messageKeys = (received: Pick<Received, 'as2'>) => (received.as2 ? [journalKey('messageId', received.as2.messageId)] : []);

function replayed(record: LogRecord, stage: string | null, draft: Omit<EntryDraft, 'kind' | 'at' | 'detail'>): EntryDraft {
  return { ...draft, kind: 'replayed', at: record.timestamp, detail: { stage, of: replayOf(record.headers) } };
}

const received: JournalSource = {
  name: 'received',
  topics: ({ topics }) => [topics.received],
  readBy: 'decoder',
  entries(record, { codec }, replayCopy) {
    const r = codec.decode('Received', record.value);
    const common = { requestId: r.requestId, workflowId: r.workflowId, keys: messageKeys(r), traceparent: r.traceparent };
    if (replayCopy) return [replayed(record, this.readBy, common)];
    const entries: EntryDraft[] = [{
      ...common, kind: 'received', at: r.receivedAt,
      detail: {
        triggerNode: r.triggerNode, triggerKind: r.triggerKind, pathSuffix: r.pathSuffix, contentType: r.contentType,
        bodyBytes: r.body.kind === 'inline' ? r.body.data.length : r.body.size, bodyStored: r.body.kind === 'ref' ? r.body.path : null,
        remoteAddress: r.remoteAddress, principal: r.principal, idempotencyKey: r.idempotencyKey, duplicateOf: r.duplicateOf,
        ...(r.as2 ? { as2: { messageId: r.as2.messageId, from: r.as2.from, to: r.as2.to, subject: r.as2.subject } } : {}),
      },
    }];
    if (r.as2?.mdn) {
      // An asynchronous MDN is only made here; what became of its delivery are the mdn-outcomes entries.
      const delivery = r.as2.asyncMdn ? { delivery: 'asynchronous', url: loggableUrl(r.as2.asyncMdn.url) } : { delivery: 'synchronous' };
      entries.push({ ...common, kind: 'as2-disposition', at: r.receivedAt, detail: { ...delivery, messageId: r.as2.messageId, disposition: dispositionOf(r.as2.mdn) } });
    }
    return entries;
  },
};

const refused: JournalSource = {
  name: 'refused',
  topics: ({ topics }) => [topics.refused],
  readBy: null,
  entries(record, { codec }) {
    const r = codec.decode('Refused', record.value);
    return [{
      requestId: r.requestId, workflowId: r.workflowId, kind: 'refused', at: r.receivedAt, traceparent: r.traceparent,
      keys: r.messageId ? [journalKey('messageId', r.messageId)] : [],
      detail: { status: r.status, code: r.code, triggerNode: r.triggerNode, triggerKind: r.triggerKind, remoteAddress: r.remoteAddress, bodyBytes: r.bodyBytes },
    }];
  },
};

const decoded: JournalSource = {
  name: 'decoded',
  topics: ({ topics }) => [topics.decoded],
  readBy: 'dispatcher',
  entries(record, { codec }, replayCopy) {
    const d = codec.decode('Decoded', record.value);
    const common = { requestId: d.requestId, workflowId: d.workflowId, keys: searchKeysOf(d) };
    if (replayCopy) return [replayed(record, this.readBy, common)];
    if (d.duplicateOf !== null) return [{ ...common, kind: 'duplicate', at: record.timestamp, detail: { duplicateOf: d.duplicateOf, triggerNode: d.triggerNode } }];
    return [{
      ...common, kind: 'decoded', at: record.timestamp,
      detail: { items: d.items.length, files: d.items.reduce((n, i) => n + i.files.length, 0), triggerNode: d.triggerNode, triggerKind: d.triggerKind },
    }];
  },
};

const executions: JournalSource = {
  name: 'executions',
  topics: ({ queues }) => [...queues],
  readBy: 'sampler',
  entries(record, { codec }, replayCopy) {
    const e = codec.decode('ExecutionRequested', record.value);
    const common = { requestId: e.requestId, workflowId: e.workflowId };
    if (replayCopy) return [replayed(record, this.readBy, common)];
    return [{
      ...common, kind: 'execution-requested', at: e.requestedAt, replayOf: e.replayOf,
      detail: { executionId: e.executionId, queue: record.topic, batchIndex: e.batchIndex, batchSize: e.batchSize, triggerNode: e.triggerNode },
    }];
  },
};

const deadLetters: JournalSource = {
  name: 'dead-letters',
  topics: ({ topics }) => [topics.deadLetter],
  readBy: null,
  entries(record, { codec }) {
    const letter = codec.decode('DeadLetter', record.value);
    return [{
      // A source that is none of our records (a poison record) belongs to no request that can be named.
      requestId: requestIdOf(letter.source.value, codec) ?? 'unknown', workflowId: letter.workflowId, kind: 'dead-lettered', at: letter.failedAt,
      traceparent: letter.source.headers.traceparent ?? null, replayOf: replayOf(letter.source.headers),
      detail: { stage: letter.stage, code: letter.errorCode, message: letter.message, attempts: letter.attempts, source: recordIdentity(letter.source) },
    }];
  },
};

/** AS2 asynchronous MDN deliveries (services/mdn/, docs/as2-async-mdn.md): one entry per attempt, `mdn-delivered`, `mdn-retrying` or `mdn-given-up`, and `mdn-dead-lettered` for a delivery the crash guard dead-lettered. */
const mdnOutcomes: JournalSource = {
  name: 'mdn-outcomes',
  topics: ({ topics }) => [topics.mdnOutcomes],
  readBy: null,
  entries(record, { codec }) {
    const o = codec.decode('MdnOutcome', record.value);
    return [{
      requestId: o.requestId, workflowId: o.workflowId, kind: `mdn-${o.outcome.replace('_', '-')}`, at: o.at, keys: [journalKey('messageId', o.messageId)],
      detail: { url: loggableUrl(o.url), mdnMessageId: o.mdnMessageId, attempts: o.attempts, status: o.status, reason: o.reason, nextAttemptAt: o.nextAttemptAt },
    }];
  },
};


export const JOURNAL_SOURCES: readonly JournalSource[] = [received, refused, decoded, executions, deadLetters, mdnOutcomes];
