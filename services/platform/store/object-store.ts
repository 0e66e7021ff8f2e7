import { createHash } from 'node:crypto';
import { Transform, type Readable } from 'node:stream';

/**
 * ObjectStore port: where request bodies too large to travel inline (claim checks), staged files
 * and AS2 non-repudiation copies live. Adapters: Azure Blob Storage and the local filesystem.
 */
export interface StoredObject {
  path: string;
  size: number;
  /** Lower-case hex SHA-256 of the content. */
  sha256: string;
  contentType: string | null;
}

export interface PutOptions {
  contentType?: string;
  /** Refuse (and store nothing) once more than this many bytes arrive. */
  maxBytes?: number;
  /**
   * Create only: when an object is already at the path, store nothing and fail with
   * ObjectStoreError('already-exists'). Decided atomically by the store, so an unconditional put of the
   * same path at the same time either finds this object (and replaces it) or is found by it.
   */
  ifAbsent?: boolean;
}

/** A small object's whole content, and the version it was read at (what `swap` names). */
export interface VersionedContent {
  content: Buffer;
  /**
   * Opaque. Azure: the blob's ETag, new with every write. Filesystem: the content's SHA-256, so a put of the
   * same bytes (and only that) leaves it as it was.
   */
  version: string;
}

export interface ObjectStore {
  readonly kind: 'azure-blob' | 'filesystem';
  /**
   * Store the whole body under `path`, replacing nothing half-written: the object appears only once
   * complete, with its metadata (head never answers one put's size, hash or type for another put's content,
   * nor two puts of one path at once leave such a mix). A body stream that errors, or exceeds maxBytes,
   * leaves no object behind.
   */
  put(path: string, body: Readable | Buffer, options?: PutOptions): Promise<StoredObject>;
  /** The content as a stream; ObjectStoreError('not-found') when missing. */
  get(path: string): Promise<Readable>;
  head(path: string): Promise<StoredObject | null>;
  /**
   * The content of a small object (a mark, a marker) with its version, read together; not-found as `get`, and
   * 'too-large' past MAX_VERSIONED_BYTES (a damaged or foreign object is not read into memory whole).
   */
  readVersioned(path: string): Promise<VersionedContent>;
  /**
   * Compare-and-swap of a small object: store `content` only if the object at `path` is still the one of
   * `version` (readVersioned, or an earlier swap's answer), or with null only if there is none; the new
   * object's version. Otherwise nothing is stored, and it fails with ObjectStoreError('changed'). Decided by
   * the store against every other swap of the path, from any client (Azure: If-Match / If-None-Match; the
   * filesystem: a lock file per path, pid-lock.ts, that a swap cut short by a crash leaves to be taken over).
   * On the filesystem a plain put or delete of the same path at the same instant is not held back by it:
   * whatever swaps a path writes it only by swaps. A swap whose answer was lost (Azure's retry after a
   * time-out) may report 'changed' against its own write: read again to tell.
   */
  swap(path: string, content: Buffer, version: string | null, options?: { contentType?: string }): Promise<string>;
  /** Remove an object; false when there was none. */
  delete(path: string): Promise<boolean>;
  /** Paths under a prefix, in lexical order. */
  list(prefix: string): AsyncIterable<string>;
  close(): Promise<void>;
}

/** The most readVersioned reads: what it serves (crash marks) is a few hundred bytes. */
export const MAX_VERSIONED_BYTES = 1 << 20;

export type ObjectStoreErrorCode = 'not-found' | 'too-large' | 'invalid-path' | 'store-unavailable' | 'already-exists' | 'changed';

export class ObjectStoreError extends Error {
  constructor(message: string, readonly code: ObjectStoreErrorCode, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ObjectStoreError';
  }
}

/** The whole content of a small object (a marker, a mark, an MDN, a body already bounded by its size); not-found as `get`. */
export async function readObject(store: ObjectStore, path: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of await store.get(path)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/**
 * A pass-through that counts and hashes what an adapter stores, failing with 'too-large' past maxBytes,
 * so every adapter reports size and SHA-256 the same way.
 */
export function createMeter(maxBytes: number | undefined): { stream: Transform; size(): number; sha256(): string } {
  const hash = createHash('sha256');
  let size = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      if (maxBytes !== undefined && size > maxBytes) return cb(new ObjectStoreError(`object exceeds ${maxBytes} bytes`, 'too-large'));
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  return { stream, size: () => size, sha256: () => hash.digest('hex') };
}

/** Object paths are relative, slash-separated, without empty, `.` or `..` segments or control characters. */
export function assertObjectPath(path: string): void {
  const ok =
    path.length > 0 &&
    path.length <= 1024 &&
    !path.startsWith('/') &&
    !/[\u0000-\u001f\u007f\\]/.test(path) &&
    path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
  if (!ok) throw new ObjectStoreError(`invalid object path: ${JSON.stringify(path.slice(0, 200))}`, 'invalid-path');
}
