'use strict';
/**
 * Preloaded into `ingress start` (`node --require`, which reaches worker threads too) by the crash tests of
 * test/e2e/stage-threads.test.ts, so that the service holds no test hook of its own. In the stage worker
 * thread only, the thread exits (code 70):
 * - CRASH_STAGE_WORKER_AT_BATCH=N: as it is handed its N-th batch, before handling it (each worker counts its
 *   own; with CRASH_STAGE_WORKER_ONCE_FILE=<path>, only a worker that finds no file there, which it creates);
 * - CRASH_STAGE_WORKER_ON=<text>: once the decoder has decoded a received record whose value holds the text,
 *   before its answer leaves the thread: a poison record that ends every process handling it, however it is
 *   batched (a record dead-lettered unhandled does not). With CRASH_STAGE_WORKER_HANG=1 the thread's event loop
 *   spins for ever there instead (a handler that never yields), for the main thread's watchdog to find.
 */
const { existsSync, writeFileSync } = require('node:fs');
const { isMainThread, parentPort, workerData } = require('node:worker_threads');

const onceFile = process.env.CRASH_STAGE_WORKER_ONCE_FILE;
function exitAtBatch() {
  if (onceFile) {
    if (existsSync(onceFile)) return;
    writeFileSync(onceFile, 'crashed');
  }
  process.exit(70);
}

const exitAt = Number(process.env.CRASH_STAGE_WORKER_AT_BATCH ?? 0);
const poison = process.env.CRASH_STAGE_WORKER_ON ? Buffer.from(process.env.CRASH_STAGE_WORKER_ON) : null;

/** The index of the poison record in a batch of the received topic, or -1. */
function poisonAt(args) {
  const packed = args?.[1];
  if (!packed?.meta?.some((m) => m.topic === 'ingress.received.v1')) return -1;
  const bytes = Buffer.from(packed.bytes);
  for (let i = 0; i < packed.meta.length; i++) {
    if (bytes.subarray(packed.bounds[i], packed.bounds[i + 1]).includes(poison)) return i;
  }
  return -1;
}

/** Whether a batch's answer decoded record `index` (an output on the decoded topic). */
function decoded(answer, index) {
  const outputs = answer?.value?.outputs;
  if (!outputs || outputs.counts.length <= index) return false;
  let at = 0;
  for (let i = 0; i < index; i++) at += outputs.counts[i];
  return outputs.records.meta.slice(at, at + outputs.counts[index]).some((m) => m.topic === 'ingress.decoded.v1');
}

if (!isMainThread && (exitAt > 0 || poison) && Array.isArray(workerData?.services)) {
  let batches = 0;
  const poisoned = new Map(); // call id → index of the poison record in its batch
  const wrapped = new WeakMap();
  const on = parentPort.on.bind(parentPort);
  const off = parentPort.off.bind(parentPort);
  const post = parentPort.postMessage.bind(parentPort);
  parentPort.on = (event, listener) => {
    if (event !== 'message') return on(event, listener);
    const counting = (message) => {
      if (message?.method === 'stage.handleBatch') {
        if (++batches === exitAt) exitAtBatch();
        const at = poison ? poisonAt(message.args) : -1;
        if (at >= 0) poisoned.set(message.id, at);
      }
      listener(message);
    };
    wrapped.set(listener, counting);
    return on(event, counting);
  };
  parentPort.off = (event, listener) => off(event, wrapped.get(listener) ?? listener);
  parentPort.postMessage = (message, transfer) => {
    if (message && 'ok' in message && poisoned.has(message.id)) {
      const at = poisoned.get(message.id);
      poisoned.delete(message.id);
      if (decoded(message, at)) {
        if (process.env.CRASH_STAGE_WORKER_HANG === '1') for (;;);
        process.exit(70);
      }
    }
    return post(message, transfer);
  };
}
