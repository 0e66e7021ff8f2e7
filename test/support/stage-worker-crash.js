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
 *   yields), for the main thread's watchdog to find;
 * - CRASH_STAGE_WORKER_WRITE_ON=<text>: as the thread writes, through a file handle (FileHandle write or
 *   writeFile) or in the body of an HTTP(S) request (ClientRequest write or end), data that holds the text: the
 *   journal stage's append of its entries (file-journal.ts), or its upsert to Cosmos DB, so a record whose entries
 *   hold it (a refused request to a workflow whose id holds it) ends every journal handling it;
 * - CRASH_STAGE_WORKER_POST_TO=<text>: as the thread makes an HTTP(S) request to a URL that holds the text,
 *   before anything is sent: the mdn stage's POST of an asynchronous MDN (guarded-post.ts) to a URL so chosen.
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

const writeOn = process.env.CRASH_STAGE_WORKER_WRITE_ON || null;
if (!isMainThread && writeOn && Array.isArray(workerData?.services)) {
  const fsp = require('node:fs').promises;
  const holds = (data) => (Buffer.isBuffer(data) || data instanceof Uint8Array ? Buffer.from(data.buffer, data.byteOffset, data.byteLength).includes(writeOn) : typeof data === 'string' && data.includes(writeOn));
  const open = fsp.open;
  let patched = false;
  // The file handle's class is not exported: its prototype is patched through the first handle opened.
  fsp.open = async function (...args) {
    const handle = await open.apply(this, args);
    if (!patched) {
      patched = true;
      const proto = Object.getPrototypeOf(handle);
      for (const method of ['write', 'writeFile']) {
        const original = proto[method];
        proto[method] = function (data, ...rest) {
          if (holds(data)) process.exit(70);
          return original.call(this, data, ...rest);
        };
      }
    }
    return handle;
  };
  const { ClientRequest } = require('node:http');
  for (const method of ['write', 'end']) {
    const original = ClientRequest.prototype[method];
    ClientRequest.prototype[method] = function (data, ...rest) {
      if (holds(data)) process.exit(70);
      return original.call(this, data, ...rest);
    };
  }
}

const postTo = process.env.CRASH_STAGE_WORKER_POST_TO || null;
if (!isMainThread && postTo && Array.isArray(workerData?.services)) {
  for (const transport of [require('node:http'), require('node:https')]) {
    const request = transport.request;
    transport.request = function (url, ...rest) {
      if (String(url instanceof URL ? url.href : typeof url === 'string' ? url : url?.path ?? '').includes(postTo)) process.exit(70);
      return request.call(this, url, ...rest);
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
