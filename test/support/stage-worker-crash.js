'use strict';
/**
 * Preloaded into `ingress start` (`node --require`, which reaches worker threads too) by the crash tests of
 * test/e2e/stage-threads.test.ts, so that the service holds no test hook of its own. In the stage worker
 * thread only, the thread exits (code 70):
 * - CRASH_STAGE_WORKER_AT_BATCH=N: as it is handed its N-th batch, before handling it (each worker counts its
 *   own; with CRASH_STAGE_WORKER_ONCE_FILE=<path>, only a worker that finds no file there, which it creates);
 * - CRASH_STAGE_WORKER_ON=<text>: as the decoder parses a JSON body that holds the text (JSON.parse, in the
 *   webhook trigger's decode): a poison record that ends every process handling it, in the middle of its
 *   handling, however it is batched (a record dead-lettered unhandled is never parsed). With
 *   CRASH_STAGE_WORKER_HANG=1 the thread's event loop spins for ever there instead (a handler that never
 *   yields), for the main thread's watchdog to find.
 * And, not a crash: CRASH_STAGE_WORKER_SLOW_READ=<text>:<ms> delays each read of a file whose path holds the
 * text (fs.promises.readFile: a workflow document of the file registry) by that long, so that a stop can find
 * a batch in hand; and CRASH_STAGE_WORKER_SLOW_CALL=<method>:<ms> delays each call the worker makes to the main
 * thread's log (log.offsetsForTime: the decoder's idempotency read-back) by that long, first printing
 * "slow call <method>" to stderr, so that a test can end the process while the call waits.
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
const poison = process.env.CRASH_STAGE_WORKER_ON || null;

if (!isMainThread && (exitAt > 0 || poison) && Array.isArray(workerData?.services)) {
  let batches = 0;
  const wrapped = new WeakMap();
  const on = parentPort.on.bind(parentPort);
  const off = parentPort.off.bind(parentPort);
  parentPort.on = (event, listener) => {
    if (event !== 'message') return on(event, listener);
    const counting = (message) => {
      if (message?.method === 'stage.handleBatch') {
        if (++batches === exitAt) exitAtBatch();
      }
      listener(message);
    };
    wrapped.set(listener, counting);
    return on(event, counting);
  };
  parentPort.off = (event, listener) => off(event, wrapped.get(listener) ?? listener);
  if (poison) {
    const parse = JSON.parse;
    JSON.parse = function (text, reviver) {
      if (typeof text === 'string' && text.includes(poison)) {
        if (process.env.CRASH_STAGE_WORKER_HANG === '1') for (;;);
        process.exit(70);
      }
      return parse.call(this, text, reviver);
    };
  }
}

const slowRead = process.env.CRASH_STAGE_WORKER_SLOW_READ || null;
if (!isMainThread && slowRead && Array.isArray(workerData?.services)) {
  const [text, ms] = [slowRead.slice(0, slowRead.lastIndexOf(':')), Number(slowRead.slice(slowRead.lastIndexOf(':') + 1))];
  const fsp = require('node:fs').promises;
  const readFile = fsp.readFile;
  fsp.readFile = async function (file, ...rest) {
    if (String(file).includes(text)) await new Promise((resolve) => setTimeout(resolve, ms));
    return readFile.call(this, file, ...rest);
  };
}

const slowCall = process.env.CRASH_STAGE_WORKER_SLOW_CALL || null;
if (!isMainThread && slowCall && Array.isArray(workerData?.services)) {
  const [method, ms] = [slowCall.slice(0, slowCall.lastIndexOf(':')), Number(slowCall.slice(slowCall.lastIndexOf(':') + 1))];
  const post = parentPort.postMessage.bind(parentPort);
  parentPort.postMessage = (message, transfer) => {
    if (message?.method !== method) return post(message, transfer);
    process.stderr.write(`slow call ${method}\n`);
    setTimeout(() => post(message, transfer), ms);
  };
}
