import type { EventLog, LogRecord, StageBatchBudget, StageBatchHandler, StageHandle, StageOptions } from '../event-log';
import { batchHandlerOf } from '../stage-batch';
import { fromWireError, toWireError, transferable, type Handler, type Rpc, type WireError } from '../../threads/rpc';
import { packLogRecords, packOutputs, unpackLogRecords, type PackedRecords } from './record-transfer';
import type { BatchAnswer } from './log-host';

/**
 * The EventLog of a thread that does not own the log: every call goes to the owning thread (log-host.ts).
 * A stage's handler runs here, on the batches the owner reads and commits; `stop` returns once the owner has
 * committed the last batch and let the stage go.
 */
export interface RemoteLog {
  log: EventLog;
  handlers: Record<string, Handler>;
}

/**
 * `committed`: the hook of the last batch answered, which the owner calls back once it committed that batch. One
 * hook a stage is enough only because the owner hands a stage's batches over one at a time, committing each before
 * it asks for the next: true of the embedded log's runStage, the only log served across threads (the stage worker
 * opens its own Kafka clients). A log that overlapped a stage's batches would need the hook keyed by batch.
 */
interface ServedStage { handle: StageBatchHandler; onRetry: StageOptions['onRetry']; committed?: () => void }

export function remoteLog(kind: EventLog['kind'], rpc: () => Rpc): RemoteLog {
  const stages = new Map<number, ServedStage>();
  let nextStage = 1;
  let nextRead = 1;

  const handlers: Record<string, Handler> = {
    async 'stage.handleBatch'(id: number, packed: PackedRecords<Omit<LogRecord, 'value'>>, budget: StageBatchBudget) {
      const stage = stages.get(id);
      if (!stage) throw new Error(`stage ${id} is not running in this thread`);
      const result = await stage.handle(unpackLogRecords(packed), budget);
      // A stage's batches come one after another: a batch answered without a commit after it (the commit failed)
      // has its hook replaced by the next one's.
      stage.committed = result.committed;
      const outputs = packOutputs(result.outputs);
      const answer: BatchAnswer = { outputs, failure: result.failure && { index: result.failure.index, error: toWireError(result.failure.error) }, committed: result.committed !== undefined };
      return transferable(answer, [outputs.records.bytes]);
    },
    'stage.committed'(id: number) {
      const stage = stages.get(id);
      const committed = stage?.committed;
      if (stage) stage.committed = undefined;
      committed?.();
    },
    'stage.retry'(id: number, error: WireError, record: (Omit<LogRecord, 'value'> & { value: Uint8Array }) | null, attempt: number) {
      stages.get(id)?.onRetry?.(fromWireError(error), record && { ...record, value: Buffer.from(record.value.buffer, record.value.byteOffset, record.value.length) }, attempt);
    },
  };

  const log: EventLog = {
    kind,
    async append(records) {
      const packed = packLogRecords(records.map((r) => ({ topic: r.topic, partition: 0, offset: '', key: r.key, value: r.value, headers: r.headers ?? {}, timestamp: 0 })));
      await rpc().call('log.append', [packed], [packed.bytes]);
    },
    settled: () => rpc().call('log.settled', []),
    async runStage(options) {
      const id = nextStage++;
      stages.set(id, { handle: batchHandlerOf(options), onRetry: options.onRetry });
      try {
        await rpc().call('log.runStage', [id, options.group, options.topic]);
      } catch (error) {
        stages.delete(id);
        throw error;
      }
      let stopped: Promise<void> | null = null;
      const handle: StageHandle = {
        stop() {
          stopped ??= rpc().call<void>('log.stopStage', [id]).finally(() => stages.delete(id));
          return stopped;
        },
        notReady: () => (stopped ? 'stopped' : null),
      };
      return handle;
    },
    // `onPassed` is not carried over: the log a thread is lent is the embedded one, which passes no offsets.
    async *read(topic, { start, signal }) {
      const id = nextRead++;
      await rpc().call('log.readOpen', [id, topic, start]);
      const close = () => rpc().notify('log.readClose', [id]);
      signal.addEventListener('abort', close, { once: true });
      try {
        while (!signal.aborted) {
          const chunk = await rpc().call<{ done: boolean; records?: PackedRecords<Omit<LogRecord, 'value'>> }>('log.readNext', [id]);
          if (chunk.done || !chunk.records) return;
          for (const record of unpackLogRecords(chunk.records)) yield record;
        }
      } finally {
        signal.removeEventListener('abort', close);
        close();
      }
    },
    ensureTopics: (topics) => rpc().call('log.ensureTopics', [topics]),
    missingTopics: (topics) => rpc().call('log.missingTopics', [topics]),
    endOffsets: (topic) => rpc().call('log.endOffsets', [topic]),
    firstOffsets: (topic) => rpc().call('log.firstOffsets', [topic]),
    consumerLag: (group, topic) => rpc().call('log.consumerLag', [group, topic]),
    offsetsForTime: (topic, timestamp) => rpc().call('log.offsetsForTime', [topic, timestamp]),
    // The owning thread opened the log and closes it.
    async close() { /* nothing held here */ },
  };
  return { log, handlers };
}
