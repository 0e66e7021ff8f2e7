'use strict';
/**
 * Preloaded into `ingress start` (`node --require`, which reaches worker threads too) by the crash tests of
 * test/e2e/stage-threads.test.ts, so that the service holds no test hook of its own. In the stage worker
 * thread only, the thread exits as it is handed its CRASH_STAGE_WORKER_AT_BATCH-th batch, before answering it.
 */
const { isMainThread, parentPort, workerData } = require('node:worker_threads');

const exitAt = Number(process.env.CRASH_STAGE_WORKER_AT_BATCH ?? 0);
if (!isMainThread && exitAt > 0 && Array.isArray(workerData?.services)) {
  let batches = 0;
  const wrapped = new WeakMap();
  const on = parentPort.on.bind(parentPort);
  const off = parentPort.off.bind(parentPort);
  parentPort.on = (event, listener) => {
    if (event !== 'message') return on(event, listener);
    const counting = (message) => {
      if (message?.method === 'stage.handleBatch' && ++batches === exitAt) process.exit(70);
      listener(message);
    };
    wrapped.set(listener, counting);
    return on(event, counting);
  };
  parentPort.off = (event, listener) => off(event, wrapped.get(listener) ?? listener);
}
