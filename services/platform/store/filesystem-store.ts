import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { assertObjectPath, createMeter, MAX_VERSIONED_BYTES, ObjectStoreError, type ObjectStore, type PutOptions, type StoredObject } from './object-store';
import { headerLength, parseHeader, writeHeader, type ObjectHeader } from './object-file';
import { SMALL_UPDATE_LOCK_WAIT_MS, describeHolder, whileLockFile } from '../files/pid-lock';
import { durableFolders, makeDurableFolders, syncFolder, type SyncFolder } from '../files/durable-folders';
import { emitUnflushed, type Unflushed } from '../registry/atomic-file';

/**
 * The ObjectStore of `npm start`. An object is one file, DATA_DIR/objects/v2/<path>: a header with its size,
 * SHA-256 and content type (object-file.ts), then its content. A put writes the whole file under
 * objects/tmp/, syncs it and renames it into place, so the content and what describes it arrive together, by
 * one rename: a reader sees the old object or the new one, never one put's bytes with another's type or hash,
 * whoever else puts the same path at the same time (the service's main thread and its stage worker thread each
 * open a store on DATA_DIR; so may other processes on it). A kill -9 mid-put leaves the old object.
 *
 * A swap (compare-and-swap) holds the path's lock file, objects/locks/<SHA-256 of the path>.lock (a pid lock,
 * files/pid-lock.ts: one its holder left by ending is taken over), while it compares the object's version (its
 * content's SHA-256, from the header) and puts; plain puts take no lock.
 *
 * Durable when a put resolves: the file is fsync'd before its rename, then the folder it is renamed into, and
 * every folder of its path the first time this process puts into it (durable-folders.ts), so that an object
 * answered for survives a power loss, not only its content. A delete flushes the folder it unlinked from, so that
 * a deleted object does not come back after a power loss (a staged body dropped, a crash mark removed).
 *
 * Objects an earlier release stored are two files, the content under objects/data/<path> and its metadata under
 * objects/meta/<path>.json, written one after the other. They are read as before (`head` describes one whose
 * metadata is missing from its content) until a put of the path replaces them, or a delete removes them.
 */
export interface FilesystemStoreOptions {
  /** Flushes a folder's entries (durable-folders.ts); a test records the folders flushed. */
  sync?: SyncFolder;
  /** Told when a delete's unlink landed but its folder could not be flushed; by default a process warning. */
  onUnflushed?: Unflushed;
}

export async function openFilesystemStore(dataDir: string, options: FilesystemStoreOptions = {}): Promise<ObjectStore> {
  const sync = options.sync ?? syncFolder;
  const onUnflushed = options.onUnflushed ?? emitUnflushed;
  const root = path.resolve(dataDir, 'objects');
  const objectRoot = path.join(root, 'v2');
  const tmpRoot = path.join(root, 'tmp');
  const lockRoot = path.join(root, 'locks');
  for (const d of [objectRoot, tmpRoot, lockRoot]) await makeDurableFolders(d, sync);
  const folders = durableFolders(objectRoot, sync);
  await sweepAbandoned(tmpRoot);
  /**
   * After an unlink landed, its folder is flushed; a flush that fails is not a failed delete (as for
   * writeFileAtomically's rename): the object is gone for every reader, and a delete reported failed would be
   * retried for nothing or taken for an object still there. Only a power loss before the folder is next flushed
   * could bring it back, which the warning says.
   */
  const flushRemoval = async (file: string): Promise<void> => {
    try {
      await sync(path.dirname(file));
    } catch (error) {
      onUnflushed('an object was deleted, but its folder could not be flushed to disk: it is gone for every reader; a power loss before the folder is next flushed may bring it back', { file, error: (error as Error).message });
    }
  };
  const legacy = await legacyObjects(root, flushRemoval);

  const fileOf = (p: string) => path.join(objectRoot, ...p.split('/'));
  /** The object's file, open; null when there is none here (an earlier release's copy may still be). */
  const openObject = async (p: string): Promise<fsp.FileHandle | null> => {
    try {
      return await fsp.open(fileOf(p), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw readFailure(p, error);
    }
  };
  const lockOf = (p: string) => path.join(lockRoot, `${createHash('sha256').update(p).digest('hex')}.lock`);

  /** The version of the object at a path now (its content's SHA-256), or null when there is none. */
  const versionOf = async (p: string): Promise<string | null> => {
    try {
      return (await store.readVersioned(p)).version;
    } catch (error) {
      if (error instanceof ObjectStoreError && error.code === 'not-found') return null;
      throw error;
    }
  };

  const store: ObjectStore = {
    kind: 'filesystem',

    async put(p: string, body: Readable | Buffer, options: PutOptions = {}): Promise<StoredObject> {
      assertObjectPath(p);
      const source = Buffer.isBuffer(body) ? Readable.from([body]) : body;
      const exclusive = options.ifAbsent === true;
      // Known before the body is read, when it can be; the link below decides for puts at the same time.
      if (exclusive && ((await exists(fileOf(p))) || (await legacy?.exists(p)))) {
        source.destroy?.();
        throw new ObjectStoreError(`an object is already at ${p}`, 'already-exists');
      }
      const contentType = options.contentType ?? null;
      const tmp = path.join(tmpRoot, randomUUID());
      const meter = createMeter(options.maxBytes);
      const target = fileOf(p);
      let described: ObjectHeader;
      try {
        await pipeline(source, meter.stream, createWriteStream(tmp, { mode: 0o600, start: headerLength(contentType) }));
        described = { size: meter.size(), sha256: meter.sha256(), contentType };
        const handle = await fsp.open(tmp, 'r+');
        try {
          await writeHeader(handle, described);
          await handle.datasync();
        } finally {
          await handle.close();
        }
        await folders.make(path.dirname(target));
        if (exclusive) {
          // Linked, not renamed: the link fails (EEXIST) when an object is there, whoever wrote it meanwhile.
          await fsp.link(tmp, target);
          await fsp.unlink(tmp);
        } else {
          await fsp.rename(tmp, target);
        }
        await sync(path.dirname(target));
      } catch (error) {
        await fsp.rm(tmp, { force: true });
        if (error instanceof ObjectStoreError) throw error;
        if (exclusive && (error as NodeJS.ErrnoException).code === 'EEXIST') throw new ObjectStoreError(`an object is already at ${p}`, 'already-exists');
        throw new ObjectStoreError(`filesystem store could not write: ${(error as Error).message}`, 'store-unavailable', { cause: error });
      }
      // An earlier release's copy would come back once this one is deleted: it goes (this object is read first meanwhile).
      await legacy?.remove(p).catch(() => undefined);
      return { path: p, ...described };
    },

    async get(p) {
      assertObjectPath(p);
      const handle = await openObject(p);
      if (handle === null) {
        if (legacy) return legacy.get(p);
        throw new ObjectStoreError(`no object at ${p}`, 'not-found');
      }
      try {
        const { contentStart } = await parseHeader(handle);
        // The stream owns the FileHandle and closes it once: closing `handle.fd` through the stream and then
        // the handle again closed the same descriptor number twice, by then possibly another file's (EBADF).
        return handle.createReadStream({ start: contentStart });
      } catch (error) {
        await handle.close();
        throw readFailure(p, error);
      }
    },

    async head(p) {
      assertObjectPath(p);
      const handle = await openObject(p);
      if (handle === null) return legacy ? legacy.head(p) : null;
      try {
        const { size, sha256, contentType } = await parseHeader(handle);
        return { path: p, size, sha256, contentType };
      } catch (error) {
        throw readFailure(p, error);
      } finally {
        await handle.close();
      }
    },

    async readVersioned(p) {
      assertObjectPath(p);
      const handle = await openObject(p);
      if (handle === null) {
        if (!legacy) throw new ObjectStoreError(`no object at ${p}`, 'not-found');
        const chunks: Buffer[] = [];
        for await (const chunk of await legacy.get(p)) chunks.push(chunk as Buffer);
        const content = Buffer.concat(chunks);
        return { content, version: createHash('sha256').update(content).digest('hex') };
      }
      try {
        // One open file: the content and the hash in its header are one put's, whatever is renamed over it meanwhile.
        const { size, sha256, contentStart } = await parseHeader(handle);
        // The header's size is checked before it is allocated: a damaged file must not ask for gigabytes.
        if (size > MAX_VERSIONED_BYTES) throw new ObjectStoreError(`the object at ${p} is ${size} bytes, more than the ${MAX_VERSIONED_BYTES} a versioned read takes`, 'too-large');
        if (contentStart + size > (await handle.stat()).size) throw new Error('not an object file of this store: its content is cut short');
        const content = Buffer.alloc(size);
        for (let at = 0; at < size;) {
          const { bytesRead } = await handle.read(content, at, size - at, contentStart + at);
          if (bytesRead === 0) throw new Error('not an object file of this store: its content is cut short');
          at += bytesRead;
        }
        return { content, version: sha256 };
      } catch (error) {
        throw readFailure(p, error);
      } finally {
        await handle.close();
      }
    },

    async swap(p, content, version, options = {}) {
      assertObjectPath(p);
      return whileLocked(lockOf(p), p, async () => {
        if ((await versionOf(p)) !== version) throw new ObjectStoreError(`the object at ${p} is no longer the one of version ${version}`, 'changed');
        return (await store.put(p, content, { contentType: options.contentType })).sha256;
      });
    },

    async delete(p) {
      assertObjectPath(p);
      let found = true;
      try {
        await fsp.unlink(fileOf(p));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new ObjectStoreError(`filesystem store could not delete ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error });
        found = false;
      }
      if (found) await flushRemoval(fileOf(p));
      return (await legacy?.remove(p)) || found;
    },

    async *list(prefix) {
      const found = new Set<string>();
      await walk(objectRoot, '', found);
      if (legacy) await walk(legacy.dataRoot, '', found);
      yield* [...found].filter((p) => p.startsWith(prefix)).sort();
    },

    async close() { /* nothing held open */ },
  };
  return store;
}

function whileLocked<R>(lockFile: string, p: string, work: () => Promise<R>): Promise<R> {
  return whileLockFile(lockFile, SMALL_UPDATE_LOCK_WAIT_MS, {
    couldNotLock: (error) => new ObjectStoreError(`filesystem store could not lock ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error }),
    heldTooLong: (busy, waitedMs) => new ObjectStoreError(`filesystem store could not swap ${p}: ${describeHolder(busy)} holds its lock ${lockFile} (waited ${(waitedMs / 1000).toFixed(1)} s)${busy.elsewhere ? '; if that process is gone, remove the lock file' : ''}`, 'store-unavailable'),
  }, work);
}

const readFailure = (p: string, error: unknown) => (error instanceof ObjectStoreError ? error
  : new ObjectStoreError(`filesystem store could not read ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error }));

interface LegacyObjects {
  dataRoot: string;
  exists(p: string): Promise<boolean>;
  get(p: string): Promise<Readable>;
  head(p: string): Promise<StoredObject | null>;
  /** Remove the object's content and metadata; whether there was one. */
  remove(p: string): Promise<boolean>;
}

/**
 * The objects an earlier release stored under objects/data and objects/meta, or null when there are none (a
 * DATA_DIR made by this release): nothing writes there any more, so none can appear later.
 */
async function legacyObjects(root: string, flushRemoval: (file: string) => Promise<void>): Promise<LegacyObjects | null> {
  const dataRoot = path.join(root, 'data');
  const metaRoot = path.join(root, 'meta');
  const entries = await fsp.readdir(dataRoot).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [] as string[];
    throw error;
  });
  if (entries.length === 0) return null;
  const fileOf = (p: string) => path.join(dataRoot, ...p.split('/'));
  const metaOf = (p: string) => path.join(metaRoot, ...p.split('/')) + '.json';
  return {
    dataRoot,
    exists: (p) => exists(fileOf(p)),
    async get(p) {
      try {
        return (await fsp.open(fileOf(p), 'r')).createReadStream();
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectStoreError(`no object at ${p}`, 'not-found');
        throw readFailure(p, error);
      }
    },
    async head(p) {
      try {
        return JSON.parse(await fsp.readFile(metaOf(p), 'utf8')) as StoredObject;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw readFailure(p, error);
      }
      // The content was put in place before its metadata: a process that ended between the two left an object
      // that get() and list() return, so head() says what it is rather than that it is not there. Its type was lost.
      try {
        return { path: p, ...(await describeFile(fileOf(p))), contentType: null };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw readFailure(p, error);
      }
    },
    async remove(p) {
      let found = true;
      try {
        await fsp.unlink(fileOf(p));
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ObjectStoreError(`filesystem store could not delete ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error });
        found = false;
      }
      await fsp.rm(metaOf(p), { force: true });
      if (found) {
        // Both folders: metadata brought back alone by a power loss would have head describe an object get has not.
        await flushRemoval(fileOf(p));
        await flushRemoval(metaOf(p));
      }
      return found;
    },
  };
}

/**
 * A put's temp file lives only while its body arrives, which the receiver bounds to minutes; one older than
 * this was left by a process that ended mid-put (kill -9, a power loss) and holds partner bytes nothing names.
 */
const ABANDONED_TMP_MS = 15 * 60_000;

async function sweepAbandoned(tmpRoot: string): Promise<void> {
  const cutOff = Date.now() - ABANDONED_TMP_MS;
  for (const name of await fsp.readdir(tmpRoot)) {
    const file = path.join(tmpRoot, name);
    const stat = await fsp.lstat(file).catch(() => null);
    if (stat && stat.mtimeMs < cutOff) await fsp.rm(file, { recursive: true, force: true });
  }
}

async function describeFile(file: string): Promise<{ size: number; sha256: string }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of (await fsp.open(file, 'r')).createReadStream() as AsyncIterable<Buffer>) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { size, sha256: hash.digest('hex') };
}

async function walk(dir: string, relative: string, out: Set<string>): Promise<void> {
  let entries: import('node:fs').Dirent[];
  try { entries = await fsp.readdir(dir, { withFileTypes: true }); } catch { return; }
  for (const e of entries) {
    const rel = relative ? `${relative}/${e.name}` : e.name;
    if (e.isDirectory()) await walk(path.join(dir, e.name), rel, out);
    else if (e.isFile()) out.add(rel);
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fsp.access(file);
    return true;
  } catch {
    return false;
  }
}
