import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import type { ObjectStore } from '../platform/store/object-store';
import type { Answer } from '../triggers/answers';
import type { BodyValidator, ReceivedBody } from '../triggers/trigger';
import { heldShare, type HeldBytes } from '../triggers/held-bytes';
import type { IdleBodies, IdleWatch } from './idle-bodies';

/**
 * Read a request body under a size limit that holds for chunked bodies too. Up to `inlineMax` bytes
 * stay in memory (they travel inside the received record); past that the body streams into the object
 * store as a claim check and only its reference travels. Never more than `inlineMax` is held in memory.
 * A trigger's validator sees every chunk as it arrives; the slower of it and the store sets the pace. A
 * validator that holds the body whole (BodyValidator.holdsWhole) is its only keeper: nothing is held here or
 * staged, and the body's bytes reach the store only as its trigger's persistBody.
 *
 * What all requests hold in memory while their bodies arrive is bounded too (`held`, MAX_HELD_BODY_BYTES):
 * a thousand uploads stalled just under `inlineMax` would otherwise hold a thousand times it. A request
 * that finds the budget spent stops being read and is told `busy`, which the receiver answers 503. A body
 * from which nothing (or too little) arrives for a while is given up as `idle` (idle-bodies.ts), which the receiver answers 408.
 */
export type BodyOutcome =
  | { ok: true; body: ReceivedBody; stagedPath: string | null; lastByteAt: number }
  | { ok: false; reason: 'too-large' | 'aborted' | 'store-failed' | 'busy' | 'idle'; error?: unknown }
  | { ok: false; reason: 'rejected'; answer: Answer };

export interface BodyReaderOptions {
  maxBytes: number;
  inlineMax: number;
  store: ObjectStore;
  /** Where a large body goes; only called when the body outgrows inlineMax. */
  stagingPath: () => string;
  validator?: BodyValidator | null;
  /** The memory budget the bytes held inline take room in until the body is read (all requests together). */
  held?: HeldBytes | null;
  /** Gives up a body from which nothing arrives for too long. */
  idle?: IdleBodies | null;
}

/**
 * The room one body holds in the budget while it arrives: its first `inlineMax` bytes, given back once it
 * outgrows them (it then streams to the store) or when it is settled. readBody and drainBody count alike,
 * so a drained body (a missing workflow) meets the budget exactly as a read one would.
 */
function inlineRoom(budget: HeldBytes | null, inlineMax: number) {
  const share = heldShare(budget);
  return {
    /** Count a chunk that brings the body to `size` bytes; false when the budget has no room for it. */
    take(bytes: number, size: number): boolean {
      if (size > inlineMax) { share.release(); return true; }
      return share.take(bytes);
    },
    release: () => share.release(),
  };
}

interface Drainable {
  write(chunk: Buffer): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

export function readBody(req: IncomingMessage, options: BodyReaderOptions): Promise<BodyOutcome> {
  const validator = options.validator ?? null;
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > options.maxBytes) {
    validator?.abort();
    return Promise.resolve({ ok: false, reason: 'too-large' });
  }
  // The client may have gone while the workflow was looked up: its 'aborted' will not come again.
  if (req.destroyed) {
    validator?.abort();
    return Promise.resolve({ ok: false, reason: 'aborted' });
  }

  return new Promise<BodyOutcome>((resolve) => {
    const chunks: Buffer[] = [];
    // Staged bodies are hashed as they stream; inline ones only if asked (body.sha256()).
    let hash: ReturnType<typeof createHash> | null = null;
    let size = 0;
    let settled = false;
    let waiting = 0;
    let spill: { stream: PassThrough; done: Promise<unknown>; path: string } | null = null;
    const room = inlineRoom(options.held ?? null, options.inlineMax);
    const holdsWhole = validator?.holdsWhole === true;
    if (holdsWhole) hash = createHash('sha256');

    // One watch over the whole body. Silence and the rate count only while the body is ours to read, not
    // while we hold it back for a slow writer (pause and resume).
    const watch: IdleWatch | null = options.idle?.watch(() => finish({ ok: false, reason: 'idle' })) ?? null;

    /** When the body's last byte arrived (performance.now()); what the sender waits from. */
    let lastByteAt = 0;
    const finish = (outcome: BodyOutcome) => {
      if (settled) return;
      settled = true;
      watch?.end();
      room.release();
      req.off('data', onData);
      if (!outcome.ok) {
        req.pause();
        validator?.abort();
        spill?.stream.destroy(new Error('request body abandoned'));
      }
      resolve(outcome);
    };
    // Pause the request until every writer that asked for it has drained.
    const feed = (writer: Drainable, chunk: Buffer) => {
      if (writer.write(chunk)) return;
      if (waiting++ === 0) { req.pause(); watch?.pause(); }
      writer.once('drain', () => { if (--waiting === 0 && !settled) { watch?.resume(); req.resume(); } });
    };

    const onData = (chunk: Buffer) => {
      watch?.touch(chunk.length);
      size += chunk.length;
      if (size > options.maxBytes) return finish({ ok: false, reason: 'too-large' });
      // A validator that holds the body whole gets it alone: nothing is held here, nothing staged (only hashed).
      if (holdsWhole) { hash!.update(chunk); return feed(validator!, chunk); }
      if (validator) feed(validator, chunk);
      if (spill) { hash!.update(chunk); return feed(spill.stream, chunk); }
      // Past inlineMax the chunks are the claim check's stream's, which pauses the request when full.
      if (!room.take(chunk.length, size)) return finish({ ok: false, reason: 'busy' });
      chunks.push(chunk);
      if (size > options.inlineMax) {
        const stream = new PassThrough();
        const path = options.stagingPath();
        hash = createHash('sha256');
        for (const c of chunks) hash.update(c);
        const done = options.store.put(path, stream, { maxBytes: options.maxBytes });
        done.catch((error) => finish({ ok: false, reason: 'store-failed', error }));
        spill = { stream, done, path };
        for (const c of chunks.splice(0)) feed(stream, c);
      }
    };

    // `on`, not `once`: each of these fires at most once for a request, finish() settles only once, and
    // `once` wraps every listener in a bound function, on every request.
    req.on('data', onData);
    req.on('aborted', () => finish({ ok: false, reason: 'aborted' }));
    req.on('error', (error) => finish({ ok: false, reason: 'aborted', error }));

    /** The body as read: held in memory, or staged as a claim check (hashed while it streamed). */
    const accepted = (s: typeof spill): BodyOutcome => {
      const inline = s || holdsWhole ? null : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
      let digest = s || holdsWhole ? hash!.digest('hex') : null;
      const sha256 = () => (digest ??= createHash('sha256').update(inline!).digest('hex'));
      return { ok: true, body: { size, sha256, inline, readStaged: s ? () => options.store.get(s.path) : null }, stagedPath: s ? s.path : null, lastByteAt };
    };
    /** Once the validator's verdict and the claim check's write are in. */
    const afterWriters = async (s: typeof spill, ended?: Promise<Answer | null>) => {
      try {
        if (s) s.stream.end();
        const [verdict] = await Promise.all([ended ?? (validator ? validator.end() : null), s?.done]);
        if (verdict) {
          // The body was refused: a claim check already written is not referenced by anything.
          if (s) void options.store.delete(s.path).catch(() => undefined);
          return finish({ ok: false, reason: 'rejected', answer: verdict });
        }
        finish(accepted(s));
      } catch (error) {
        finish({ ok: false, reason: 'store-failed', error });
      }
    };
    req.on('end', () => {
      if (settled) return;
      lastByteAt = performance.now();
      watch?.end(); // all of it arrived: what follows (the store, the validator) is not the sender's to hurry
      // The common case, a small body with nothing streaming alongside, settles at once: no promise hops.
      if (!spill && !validator) return finish(accepted(null));
      // So does a small body whose validator has its verdict at once (a signature's MAC).
      const verdict = !spill && validator ? validator.end() : undefined;
      if (verdict === undefined || verdict instanceof Promise) return void afterWriters(spill, verdict);
      finish(verdict ? { ok: false, reason: 'rejected', answer: verdict } : accepted(null));
    });
  });
}

/** What a drain counts and watches as readBody would, though it keeps nothing. */
export interface DrainOptions {
  /** The budget the first `inlineMax` bytes take room in, as readBody's do. */
  account?: { held: HeldBytes; inlineMax: number } | null;
  idle?: IdleBodies | null;
}

export type DrainOutcome = 'read' | 'too-large' | 'busy' | 'idle';

/** How a drain ended, how many bytes of body it read, and when (performance.now()). */
export interface Drained {
  outcome: DrainOutcome;
  bytes: number;
  endedAt: number;
}

/**
 * Read and discard a body (bounded), so an answer that does not need it takes about as long as one that does.
 * 'too-large' when it stopped reading at `maxBytes`, 'busy' when the budget was spent where readBody would
 * have found it so, 'idle' when nothing arrived for too long (or too little), 'read' otherwise (ended, or the client went away).
 */
export function drainBody(req: IncomingMessage, maxBytes: number, options: DrainOptions = {}): Promise<Drained> {
  // Nothing more will come: a body already read to its end (a verdict given after it), or a client gone.
  // Waiting for events that fired before would keep the request, and its watch, until the idle timeout.
  if (req.readableEnded || req.destroyed) return Promise.resolve({ outcome: 'read', bytes: 0, endedAt: performance.now() });
  const room = inlineRoom(options.account?.held ?? null, options.account?.inlineMax ?? 0);
  return new Promise((resolve) => {
    let size = 0;
    let settled = false;
    const done = (outcome: DrainOutcome) => {
      if (settled) return;
      settled = true;
      watch?.end();
      req.off('data', onData);
      if (outcome !== 'read') req.pause();
      room.release();
      resolve({ outcome, bytes: size, endedAt: performance.now() });
    };
    const watch = options.idle?.watch(() => done('idle')) ?? null;
    const onData = (chunk: Buffer) => {
      watch?.touch(chunk.length);
      size += chunk.length;
      if (size > maxBytes) return done('too-large');
      if (!room.take(chunk.length, size)) return done('busy');
    };
    const ended = () => done('read');
    req.on('data', onData);
    req.once('end', ended);
    req.once('aborted', ended);
    req.once('error', ended);
    // A reader that gave up on the body paused it; a 'data' listener alone does not undo that.
    req.resume();
  });
}
