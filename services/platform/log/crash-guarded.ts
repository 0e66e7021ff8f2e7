import type { Logger } from '../logger/logger';
import { crashGuard, type CrashMarks } from './crash-guard';
import type { LogRecord, OutRecord, StageBatchHandler } from './event-log';

/**
 * A stage's batch handler under the crash guard (crash-guard.ts): what the guard plans for a batch, carried
 * out. A range a previous life ended on is handed over one record at a time; a record convicted of ending the
 * process (two strikes) is not handed over at all, and `crashed` says what stands for it in the stage's
 * output instead (its dead letter; nothing, for a stage that has no dead letters), committed like any
 * record's outputs.
 */
export interface CrashGuarding {
  marks: CrashMarks;
  /** The stage's consumer group, which its marks are kept under. */
  group: string;
  /** For logs and the dead letter. */
  stage: string;
  logger: Logger;
  /** The outputs of a record convicted of ending the process, never handled again. */
  crashed(record: LogRecord): OutRecord[];
}

export function withCrashGuard(handle: StageBatchHandler, guarding: CrashGuarding): StageBatchHandler {
  const guard = crashGuard(guarding.marks, guarding.group, guarding.logger, guarding.stage);
  return async (records, budget) => {
    if (records.length === 0) return handle(records, budget);
    const turn = await guard.begin(records, budget.firstSinceOwned === true);
    if (turn.plan === 'crashed') return { outputs: [guarding.crashed(records[0])] };
    try {
      return await handle(turn.plan === 'alone' ? records.slice(0, 1) : records, budget);
    } finally {
      await turn.done();
    }
  };
}
