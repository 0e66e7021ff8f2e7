import type { EventLog, StageBatchHandler, StageOptions } from '../../services/platform/log/event-log';

/**
 * An EventLog whose runStage only keeps each stage's batch handler (by input topic), for unit tests that call a
 * stage's handler as an adapter would, with batches they build. Nothing else of the log is there.
 */
export function capturedStages(): { log: EventLog; handlers: Map<string, { group: string; handle: StageBatchHandler }> } {
  const handlers = new Map<string, { group: string; handle: StageBatchHandler }>();
  const log = {
    async runStage(options: StageOptions) {
      handlers.set(options.topic, { group: options.group, handle: options.handleBatch! });
      return { stop: async () => undefined, notReady: () => null };
    },
  } as unknown as EventLog;
  return { log, handlers };
}
