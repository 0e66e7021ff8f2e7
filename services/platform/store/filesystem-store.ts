import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { assertObjectPath, createMeter, ObjectStoreError, type ObjectStore, type PutOptions, type StoredObject } from './object-store';

/**
 * The ObjectStore of `npm start`: content under DATA_DIR/objects/data/<path>, its size, hash and type
 * under DATA_DIR/objects/meta/<path>.json. A put writes a temp file, syncs it and renames it into place,
 * so a reader sees the whole object or none.
 */
export async function openFilesystemStore(dataDir: string): Promise<ObjectStore> {
  const root = path.resolve(dataDir, 'objects');
  const dataRoot = path.join(root, 'data');
  const metaRoot = path.join(root, 'meta');
  const tmpRoot = path.join(root, 'tmp');
  await Promise.all([dataRoot, metaRoot, tmpRoot].map((d) => fsp.mkdir(d, { recursive: true })));
  await sweepAbandoned(tmpRoot);

  const fileOf = (p: string) => path.join(dataRoot, ...p.split('/'));
  const metaOf = (p: string) => path.join(metaRoot, ...p.split('/')) + '.json';

  /**
   * `exclusive`: the file is linked into place, which fails when one is there (EEXIST), instead of renamed
   * over it: the kernel decides, whoever else writes the same path meanwhile.
   */
  async function writeDurably(target: string, source: Readable, maxBytes: number | undefined, exclusive = false): Promise<{ size: number; sha256: string }> {
    const tmp = path.join(tmpRoot, randomUUID());
    const meter = createMeter(maxBytes);
    try {
      const out = createWriteStream(tmp, { mode: 0o600 });
      await pipeline(source, meter.stream, out);
      const handle = await fsp.open(tmp, 'r+');
      try { await handle.datasync(); } finally { await handle.close(); }
      await fsp.mkdir(path.dirname(target), { recursive: true });
      if (exclusive) {
        await fsp.link(tmp, target);
        await fsp.unlink(tmp);
      } else {
        await fsp.rename(tmp, target);
      }
      await syncDirectory(path.dirname(target));
      return { size: meter.size(), sha256: meter.sha256() };
    } catch (error) {
      await fsp.rm(tmp, { force: true });
      if (error instanceof ObjectStoreError) throw error;
      if (exclusive && (error as NodeJS.ErrnoException).code === 'EEXIST') throw new ObjectStoreError('an object is already there', 'already-exists');
      throw new ObjectStoreError(`filesystem store could not write: ${(error as Error).message}`, 'store-unavailable', { cause: error });
    }
  }

  return {
    kind: 'filesystem',

    async put(p: string, body: Readable | Buffer, options: PutOptions = {}): Promise<StoredObject> {
      assertObjectPath(p);
      const source = Buffer.isBuffer(body) ? Readable.from([body]) : body;
      const exclusive = options.ifAbsent === true;
      if (exclusive && (await exists(fileOf(p)))) {
        source.destroy?.();
        throw new ObjectStoreError(`an object is already at ${p}`, 'already-exists');
      }
      const { size, sha256 } = await writeDurably(fileOf(p), source, options.maxBytes, exclusive).catch((error: unknown) => {
        throw error instanceof ObjectStoreError && error.code === 'already-exists' ? new ObjectStoreError(`an object is already at ${p}`, 'already-exists') : error;
      });
      const stored: StoredObject = { path: p, size, sha256, contentType: options.contentType ?? null };
      // Exclusive: the metadata of a put that replaced this object meanwhile (data, then metadata) is kept.
      await writeDurably(metaOf(p), Readable.from([Buffer.from(JSON.stringify(stored))]), undefined, exclusive).catch((error: unknown) => {
        if (!(error instanceof ObjectStoreError && error.code === 'already-exists')) throw error;
      });
      return stored;
    },

    async get(p) {
      assertObjectPath(p);
      try {
        const handle = await fsp.open(fileOf(p), 'r');
        // The stream owns the FileHandle and closes it once: closing `handle.fd` through the stream and then
        // the handle again closed the same descriptor number twice, by then possibly another file's (EBADF).
        return handle.createReadStream();
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectStoreError(`no object at ${p}`, 'not-found');
        throw new ObjectStoreError(`filesystem store could not read ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error });
      }
    },

    async head(p) {
      assertObjectPath(p);
      try {
        return JSON.parse(await fsp.readFile(metaOf(p), 'utf8')) as StoredObject;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
          throw new ObjectStoreError(`filesystem store could not read ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error });
        }
      }
      // The data is put in place before its metadata: a process that ended between the two left an object that
      // get() and list() return, so head() says what it is rather than that it is not there. Its type was lost.
      try {
        return { path: p, ...(await describeFile(fileOf(p))), contentType: null };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw new ObjectStoreError(`filesystem store could not read ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error });
      }
    },

    async delete(p) {
      assertObjectPath(p);
      try {
        await fsp.unlink(fileOf(p));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw new ObjectStoreError(`filesystem store could not delete ${p}: ${(error as Error).message}`, 'store-unavailable', { cause: error });
      }
      await fsp.rm(metaOf(p), { force: true });
      return true;
    },

    async *list(prefix) {
      const found: string[] = [];
      await walk(dataRoot, '', found);
      yield* found.filter((p) => p.startsWith(prefix)).sort();
    },

    async close() { /* nothing held open */ },
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

async function walk(dir: string, relative: string, out: string[]): Promise<void> {
  let entries: import('node:fs').Dirent[];
  try { entries = await fsp.readdir(dir, { withFileTypes: true }); } catch { return; }
  for (const e of entries) {
    const rel = relative ? `${relative}/${e.name}` : e.name;
    if (e.isDirectory()) await walk(path.join(dir, e.name), rel, out);
    else if (e.isFile()) out.push(rel);
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

async function syncDirectory(dir: string) {
  const handle = await fsp.open(dir, 'r');
  try { await handle.sync(); } finally { await handle.close(); }
}
