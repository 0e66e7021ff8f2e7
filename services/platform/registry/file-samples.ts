import { randomUUID } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { sweepStaleTemps } from './atomic-file';
import { whileLocked } from './document-lock';
import { RegistryError, withSamples, type Sample, type SampleStore } from './registry';
import { sampleDocumentId } from './sample-ids';

/**
 * Sample data on files: one JSON document per trigger node under DATA_DIR/registry/samples/.
 *
 * Samples are derived data (a replay of the execution queues rebuilds them), so they are written without
 * fsync: a temp file renamed over the document, which readers in any thread or process see whole, but which an
 * OS crash or power loss may leave empty or torn. Such a document reads as no samples, with a warning, and the
 * next sample replaces it. Durably replacing every node's document on every stage batch cost the sampler more
 * CPU than anything else it did (docs/records-and-topics.md#sample-data).
 *
 * `onlyWriter`: this store's process is the only one that appends samples under DATA_DIR (the embedded log's
 * directory lock holds it to one). It then keeps the documents it writes in memory and writes them behind,
 * at most every WRITE_BEHIND_MS per node, rather than reading and replacing a node's document on every batch.
 * Without it (Kafka, where sampler processes may share a DATA_DIR) each append reads, merges and replaces,
 * holding the document's lock file (document-lock.ts).
 */
export interface FileSamplesOptions {
  onlyWriter: boolean;
  /** A document that does not parse (torn by a crash): read as empty. */
  onWarning?: (message: string, fields: Record<string, unknown>) => void;
  writeBehindMs?: number;
}

export interface FileSampleStore extends SampleStore {
  /** Write what is still held back (rejecting when some cannot be); the registry's close calls it. */
  flush(): Promise<void>;
}

const WRITE_BEHIND_MS = 100;
const RETRY_MS = 1_000;
/** Nodes whose samples stay in memory; the least recently written beyond that are read again when next needed. */
const MAX_CACHED_NODES = 1024;
const SAMPLE_FILE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.~?[A-Za-z0-9_-]*$/;
/** The longest file name Linux, macOS and Windows file systems take (bytes; these names are ASCII). */
const MAX_FILE_NAME = 255;

export async function openFileSamples(dir: string, options: FileSamplesOptions): Promise<FileSampleStore> {
  await fsp.mkdir(dir, { recursive: true });
  // Its temp files are named as writeFileAtomically's: those a kill left mid-write go the same way.
  await sweepStaleTemps(dir);
  const delay = options.writeBehindMs ?? WRITE_BEHIND_MS;
  const fileOf = (workflowId: string, node: string) => {
    const id = sampleDocumentId(workflowId, node, MAX_FILE_NAME - '.json'.length);
    if (!SAMPLE_FILE_ID.test(id)) throw new RegistryError(`invalid document id ${JSON.stringify(id.slice(0, 140))}`, 'invalid-document');
    return path.join(dir, `${id}.json`);
  };

  async function read(file: string): Promise<Sample[]> {
    let text: string;
    try { text = await fsp.readFile(file, 'utf8'); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new RegistryError(`registry could not read ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
    try {
      const samples = (JSON.parse(text) as { samples?: unknown }).samples;
      if (Array.isArray(samples)) return samples as Sample[];
    } catch {
      // Warned below, as a document of the wrong shape is.
    }
    options.onWarning?.('sample data document is not readable (torn by a crash?): read as no samples', { file, bytes: text.length });
    return [];
  }

  async function write(file: string, samples: readonly Sample[]): Promise<void> {
    const tmp = path.join(dir, `.${randomUUID()}.tmp`);
    try {
      await fsp.writeFile(tmp, JSON.stringify({ id: path.basename(file, '.json'), samples }), { mode: 0o600 });
      await fsp.rename(tmp, file);
    } catch (error) {
      await fsp.rm(tmp, { force: true }).catch(() => undefined);
      throw new RegistryError(`registry could not write ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
  }

  if (!options.onlyWriter) {
    // Under the document's lock, as the file registry's putIf: on Kafka the sampler appends from several
    // partitions and queues at once, and processes may share DATA_DIR; the second of two unlocked appends
    // replaced the first one's samples with its own.
    const appendMany = (workflowId: string, node: string, added: readonly Sample[], keep: number) => {
      const file = fileOf(workflowId, node);
      return whileLocked(file, async () => {
        const next = withSamples(await read(file), added, keep);
        if (next) await write(file, next);
      });
    };
    return {
      append: (workflowId, node, sample, keep) => appendMany(workflowId, node, [sample], keep),
      appendMany,
      list: (workflowId, node) => read(fileOf(workflowId, node)),
      async flush() {},
    };
  }

  /** What this writer holds per document: the samples, and whether the file is behind them. */
  const held = new Map<string, { samples: Sample[]; dirty: boolean }>();
  let timer: NodeJS.Timeout | null = null;
  let writing: Promise<void> = Promise.resolve();
  /** A write that failed: the next append reports it (and the sampler retries its batch), as a failed write did. */
  let failed: unknown = null;

  async function writeDirty(): Promise<void> {
    for (const [file, doc] of held) {
      if (!doc.dirty) continue;
      doc.dirty = false;
      try {
        await write(file, doc.samples);
      } catch (error) {
        doc.dirty = true;
        failed = error;
        options.onWarning?.('sample data could not be written: retrying', { file, error });
      }
    }
    // Forget the least recently written beyond the bound, once they are on file.
    let behind = false;
    for (const [file, doc] of held) {
      if (doc.dirty) behind = true;
      else if (held.size > MAX_CACHED_NODES) held.delete(file);
    }
    // What is still behind failed to write: tried again, less often than the write-behind (not once closing).
    if (behind && !timer && !closing) schedule(Math.max(delay, RETRY_MS));
  }
  function schedule(after = delay): void {
    // A failure is warned about in writeDirty and reported by the next append.
    timer = setTimeout(() => void writeBehind().catch(() => undefined), after);
    timer.unref();
  }
  const writeBehind = () => {
    if (timer) clearTimeout(timer);
    timer = null;
    writing = writing.then(writeDirty);
    return writing;
  };
  let closing = false;
  /** On close: what is held goes to file now, and what cannot is an error, not a silent loss. */
  const flush = async () => {
    closing = true;
    await writeBehind();
    const left = [...held.values()].filter((doc) => doc.dirty).length;
    if (left > 0) throw new RegistryError(`sample data of ${left} node(s) could not be written before close: ${(failed as Error | null)?.message ?? 'unknown error'}`, 'registry-unavailable', { cause: failed });
  };

  async function appendMany(workflowId: string, node: string, added: readonly Sample[], keep: number): Promise<void> {
    if (failed) {
      const error = failed;
      failed = null;
      throw error;
    }
    const file = fileOf(workflowId, node);
    let doc = held.get(file);
    if (!doc) {
      const samples = await read(file);
      // Another batch (another execution queue's) may have read it meanwhile.
      doc = held.get(file) ?? { samples, dirty: false };
    }
    held.delete(file);
    held.set(file, doc);
    const next = withSamples(doc.samples, added, keep);
    if (!next) return;
    doc.samples = next;
    doc.dirty = true;
    if (!timer) schedule();
  }

  return {
    append: (workflowId, node, sample, keep) => appendMany(workflowId, node, [sample], keep),
    appendMany,
    async list(workflowId, node) {
      const file = fileOf(workflowId, node);
      const doc = held.get(file);
      return doc ? [...doc.samples] : read(file);
    },
    flush,
  };
}
