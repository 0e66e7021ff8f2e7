import type { EventLog, LogRecord, ReadStart, StageHandle } from '../event-log';
import { fromWireError, toWireError, transferable, type Handler, type Rpc, type WireError } from '../../threads/rpc';
import { packLogRecords, unpackLogRecords, unpackOutputs, type PackedOutputs, type PackedRecords } from './record-transfer';
import { MAX_READ_BATCH_BYTES } from '../topics';

/**
 * The thread that owns the log (the embedded journal's single writer) serves it to another thread
 * (remote-log.ts). A stage registered from there runs here: this thread reads its records, ships each batch
 * over and appends the outputs it gets back with the input offset, in one journal append as ever. So nothing
 * but this thread writes the journal, and a batch the other thread never answered is never committed.
 */
export interface LogHost {
  handlers: Record<string, Handler>;
  /** Stop every stage and reader served (the other thread has gone or is going). */
  close(): Promise<void>;
}

/** `committed`: the handler wants to hear when the outputs are committed (StageBatchResult.committed). */
export interface BatchAnswer { outputs: PackedOutputs; failure?: { index: number; error: WireError }; committed?: boolean }

/**
 * The records a read hands over per call at most: enough to cross the thread boundary rarely. A call also ends
 * once its records hold MAX_READ_BATCH_BYTES, as a stage's batch does: the chunk is held here and copied once
 * more to cross, and 256 records of up to 8 MiB each would be 2 GiB.
 */
const READ_CHUNK = 256;

export function serveLog(log: EventLog, rpc: () => Rpc): LogHost {
  const stages = new Map<number, StageHandle>();
  const reads = new Map<number, { abort: AbortController; records: AsyncIterator<LogRecord> }>();

  const handlers: Record<string, Handler> = {
    async 'log.runStage'(id: number, group: string, topic: string) {
      const handle = await log.runStage({
        group, topic,
        async handleBatch(records, budget) {
          const packed = packLogRecords(records);
          const answer = await rpc().call<BatchAnswer>('stage.handleBatch', [id, packed, budget], [packed.bytes]);
          return {
            outputs: unpackOutputs(answer.outputs),
            failure: answer.failure && { index: answer.failure.index, error: fromWireError(answer.failure.error) },
            committed: answer.committed ? () => rpc().notify('stage.committed', [id]) : undefined,
          };
        },
        onRetry(error, record, attempt) {
          // A copy of the value alone: cloning the record's Buffer would take its whole backing memory along.
          rpc().notify('stage.retry', [id, toWireError(error), record && { ...record, value: new Uint8Array(record.value) }, attempt]);
        },
      });
      stages.set(id, handle);
    },
    async 'log.stopStage'(id: number) {
      const handle = stages.get(id);
      stages.delete(id);
      await handle?.stop();
    },
    'log.append': (packed: PackedRecords<Omit<LogRecord, 'value'>>) => log.append(unpackLogRecords(packed)),
    'log.settled': () => log.settled(),
    'log.readOpen'(id: number, topic: string, start: ReadStart) {
      const abort = new AbortController();
      reads.set(id, { abort, records: log.read(topic, { start, signal: abort.signal })[Symbol.asyncIterator]() });
    },
    // The first record may be waited for; after it, only what the topic already holds, so no call waits twice.
    async 'log.readNext'(id: number) {
      const read = reads.get(id);
      if (!read) return { done: true };
      const first = await read.records.next();
      if (first.done) return { done: true };
      const records: LogRecord[] = [first.value];
      let bytes = first.value.value.length;
      const ends = await log.endOffsets(first.value.topic);
      let available = Number(ends.find((p) => p.partition === first.value.partition)?.offset ?? 0) - Number(first.value.offset) - 1;
      // The next record's size is known only once it is read, so a chunk passes the bound by one record at most.
      while (available-- > 0 && records.length < READ_CHUNK && bytes < MAX_READ_BATCH_BYTES && !read.abort.signal.aborted) {
        const next = await read.records.next();
        if (next.done) break;
        records.push(next.value);
        bytes += next.value.value.length;
      }
      const packed = packLogRecords(records);
      return transferable({ done: false, records: packed }, [packed.bytes]);
    },
    'log.readClose'(id: number) {
      const read = reads.get(id);
      reads.delete(id);
      if (read) { read.abort.abort(); void read.records.return?.(); }
    },
    'log.ensureTopics': (topics: string[]) => log.ensureTopics(topics),
    'log.missingTopics': (topics: string[]) => log.missingTopics(topics),
    'log.endOffsets': (topic: string) => log.endOffsets(topic),
    'log.firstOffsets': (topic: string) => log.firstOffsets(topic),
    'log.consumerLag': (group: string, topic: string) => log.consumerLag(group, topic),
    'log.offsetsForTime': (topic: string, timestamp: number) => log.offsetsForTime(topic, timestamp),
  };

  return {
    handlers,
    async close() {
      for (const read of reads.values()) read.abort.abort();
      reads.clear();
      const handles = [...stages.values()];
      stages.clear();
      for (const handle of handles) await handle.stop();
    },
  };
}
