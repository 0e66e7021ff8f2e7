import type { LogRecord, OutRecord, StageBatchBudget, StageBatchHandler, StageBatchResult, StageHandler, StageOptions } from './event-log';

/**
 * The batch form of a stage handler, and the per-record handler as a thin adapter onto it. Both adapters
 * (embedded runStage, the Kafka transactional stage) call one batch handler per journal append or Kafka
 * transaction; a stage that shares work across a batch (one registry look-up per workflow, one span
 * decision) writes the batch form, the others keep writing one record at a time.
 */

/** How long one batch (one journal append, one Kafka transaction) may spend in its handler before it stops. */
export const STAGE_BATCH_MAX_MS = 1000;

/** The budget of a batch that starts now. */
export function stageBatchBudget(maxOutputBytes: number, firstSinceOwned = false, now = Date.now()): StageBatchBudget {
  return { maxOutputBytes, deadline: now + STAGE_BATCH_MAX_MS, firstSinceOwned };
}

/** The budget says stop before the record at `index` (never before the first: every batch makes progress). */
export function budgetSpent(budget: StageBatchBudget, index: number, outputBytes: number): boolean {
  return index > 0 && (outputBytes >= budget.maxOutputBytes || Date.now() >= budget.deadline);
}

/**
 * Run `handle` over the records in order, one after another (no promise chain per record beyond the
 * handler's own, and none at all for a handler that answers without waiting), stopping at the first failure or
 * once the budget is spent.
 */
export async function eachRecord(records: LogRecord[], budget: StageBatchBudget, handle: (record: LogRecord) => OutRecord[] | Promise<OutRecord[]>): Promise<StageBatchResult> {
  const outputs: OutRecord[][] = [];
  let bytes = 0;
  for (let i = 0; i < records.length && !budgetSpent(budget, i, bytes); i++) {
    let produced: OutRecord[];
    try {
      const out = handle(records[i]);
      // Awaited only when it is a promise: a handler that answers at once costs no microtask per record.
      produced = Array.isArray(out) ? out : await out;
    } catch (error) {
      return { outputs, failure: { index: i, error } };
    }
    outputs.push(produced);
    for (const out of produced) bytes += out.value.length;
  }
  return { outputs };
}

/** The batch handler of a stage's options: its own, or its per-record handler run by `eachRecord`. */
export function batchHandlerOf(options: Pick<StageOptions, 'handle' | 'handleBatch'>): StageBatchHandler {
  if (options.handleBatch) return options.handleBatch;
  const handle = options.handle;
  if (!handle) throw new TypeError('a stage needs handle or handleBatch');
  return (records, budget) => eachRecord(records, budget, handle);
}

/**
 * Check what a batch handler returned against the contract, so an adapter never commits past what was
 * handled: `outputs` covers a prefix of the records, and a failure names the record right after it.
 */
export function checkedBatchResult(result: StageBatchResult, count: number): StageBatchResult {
  const handled = result.outputs.length;
  if (handled > count) throw new Error(`stage batch handler returned outputs for ${handled} records of a batch of ${count}`);
  // Neither progress nor a failure would have the adapter call it again with the same batch forever.
  if (handled === 0 && count > 0 && !result.failure) throw new Error('stage batch handler handled no record of its batch and reported no failure');
  if (result.failure && result.failure.index !== handled) throw new Error(`stage batch handler failed at record ${result.failure.index} but returned outputs for ${handled}`);
  return result;
}
