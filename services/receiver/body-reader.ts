import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import type { ObjectStore } from '../platform/store/object-store';
import type { ReceivedBody } from '../triggers/trigger';

/**
 * Read a request body under a size limit that holds for chunked bodies too. Up to `inlineMax` bytes
 * stay in memory (they travel inside the received record); past that the body streams into the object
 * store as a claim check and only its reference travels. Never more than `inlineMax` is held in memory.
 */
export type BodyOutcome =
  | { ok: true; body: ReceivedBody; stagedPath: string | null }
  | { ok: false; reason: 'too-large' | 'aborted' | 'store-failed'; error?: unknown };

export interface BodyReaderOptions {
  maxBytes: number;
  inlineMax: number;
  store: ObjectStore;
  /** Where a large body goes; only called when the body outgrows inlineMax. */
  stagingPath: () => string;
}

export function readBody(req: IncomingMessage, options: BodyReaderOptions): Promise<BodyOutcome> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > options.maxBytes) return Promise.resolve({ ok: false, reason: 'too-large' });

  return new Promise<BodyOutcome>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    let spill: { stream: PassThrough; done: Promise<unknown>; path: string; hash: ReturnType<typeof createHash> } | null = null;
    const finish = (outcome: BodyOutcome) => {
      if (settled) return;
      settled = true;
      req.off('data', onData);
      resolve(outcome);
    };

    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > options.maxBytes) {
        spill?.stream.destroy(new Error('body too large'));
        req.pause();
        return finish({ ok: false, reason: 'too-large' });
      }
      if (spill) {
        spill.hash.update(chunk);
        if (!spill.stream.write(chunk)) { req.pause(); spill.stream.once('drain', () => req.resume()); }
        return;
      }
      chunks.push(chunk);
      if (size > options.inlineMax) {
        const stream = new PassThrough();
        const hash = createHash('sha256');
        const path = options.stagingPath();
        const done = options.store.put(path, stream, { maxBytes: options.maxBytes });
        done.catch((error) => { req.pause(); finish({ ok: false, reason: 'store-failed', error }); });
        spill = { stream, done, path, hash };
        for (const c of chunks) { hash.update(c); stream.write(c); }
        chunks.length = 0;
      }
    };

    req.on('data', onData);
    req.once('aborted', () => { spill?.stream.destroy(new Error('client aborted')); finish({ ok: false, reason: 'aborted' }); });
    req.once('error', (error) => { spill?.stream.destroy(error); finish({ ok: false, reason: 'aborted', error }); });
    req.once('end', () => {
      if (!spill) {
        const inline = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
        return finish({ ok: true, body: { size, sha256: null, inline }, stagedPath: null });
      }
      const s = spill;
      s.stream.end();
      s.done.then(
        () => finish({ ok: true, body: { size, sha256: s.hash.digest('hex'), inline: null }, stagedPath: s.path }),
        (error) => finish({ ok: false, reason: 'store-failed', error }),
      );
    });
  });
}

/** Read and discard a body (bounded), so an answer that does not need it takes about as long as one that does. */
export function drainBody(req: IncomingMessage, maxBytes: number): Promise<void> {
  return new Promise((resolve) => {
    let size = 0;
    const done = () => { req.off('data', onData); resolve(); };
    const onData = (chunk: Buffer) => { size += chunk.length; if (size > maxBytes) { req.pause(); done(); } };
    req.on('data', onData);
    req.once('end', done);
    req.once('aborted', done);
    req.once('error', done);
  });
}
