import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { checkDocumentSize, DOCUMENT_ID, RegistryError, sameDocument, type Document, type DocumentCollection, type Registry } from './registry';
import { whileLocked } from './document-lock';
import type { StoredCredential, WorkflowDocument } from './documents';
import { emitUnflushed, sweepStaleTemps, writeFileAtomically, type Unflushed } from './atomic-file';
import { makeDurableFolders, syncFolder } from '../files/durable-folders';
import { openFileJournal } from './file-journal';
import { openFileSamples } from './file-samples';
import { DEFAULT_JOURNAL_RETENTION_DAYS } from './journal';

/**
 * The Registry of `npm start`: one JSON file per document under DATA_DIR/registry/<collection>/,
 * replaced atomically (temp file, fsync, rename), so the CLI in another process can write while the
 * service reads. Every write of a document holds its lock file (`<id>.json.lock`, files/pid-lock.ts), so that
 * `putIf` compares and writes as one step for every process on the machine. Sample data is written without
 * fsync (file-samples.ts).
 */
export interface FileRegistryOptions {
  /** Days the request journal keeps an entry (JOURNAL_RETENTION_DAYS); the journal stage prunes older days. */
  journalRetentionDays?: number;
  /**
   * This process is the only one that appends sample data under DATA_DIR (the embedded log's directory lock
   * makes it so): the sampler's documents are then kept in memory and written behind (file-samples.ts).
   */
  onlySampleWriter?: boolean;
  /** Warnings the registry has no one else to tell (a sample document torn by a crash). */
  onWarning?: (message: string, fields: Record<string, unknown>) => void;
}

export async function openFileRegistry(dataDir: string, options: FileRegistryOptions = {}): Promise<Registry> {
  const root = path.resolve(dataDir, 'registry');
  const workflows = await fileCollection<WorkflowDocument>(path.join(root, 'workflows'), options.onWarning);
  const credentials = await fileCollection<StoredCredential>(path.join(root, 'credentials'), options.onWarning);
  const samples = await openFileSamples(path.join(root, 'samples'), { onlyWriter: options.onlySampleWriter ?? false, onWarning: options.onWarning });
  const journal = await openFileJournal(path.join(root, 'journal'), options.journalRetentionDays ?? DEFAULT_JOURNAL_RETENTION_DAYS);
  return {
    kind: 'file',
    workflows,
    credentials,
    samples,
    journal,
    async close() {
      // Closing goes on either way (callers close every backend and do not look at the answer): said here.
      try { await samples.flush(); } catch (error) { options.onWarning?.('sample data lost at close', { error }); } finally { await journal.close?.(); }
    },
  };
}

async function fileCollection<T extends Document>(dir: string, onUnflushed?: Unflushed): Promise<DocumentCollection<T>> {
  // Its name durable before a document in it is (writeFileAtomically flushes only the collection's own folder).
  await makeDurableFolders(dir);
  await sweepStaleTemps(dir);
  const name = path.basename(dir);
  const fileOf = (id: string) => {
    if (!DOCUMENT_ID.test(id) && !/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.[A-Za-z0-9_-]+$/.test(id)) throw new RegistryError(`invalid document id ${JSON.stringify(id.slice(0, 140))}`, 'invalid-document');
    return path.join(dir, `${id}.json`);
  };
  const read = async (file: string): Promise<T | null> => {
    let text: string;
    try { text = await fsp.readFile(file, 'utf8'); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new RegistryError(`registry could not read ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
    let parsed: unknown;
    try { parsed = JSON.parse(text); } catch (error) {
      throw new RegistryError(`registry file ${file} is not valid JSON`, 'corrupt-document', { cause: error });
    }
    // A file that parses to no document (`null`, a number, a list) is as torn as one that does not parse: read as
    // missing, a workflow's hook would answer as for no workflow and its partners' events would be dropped.
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new RegistryError(`registry file ${file} is not a JSON object (it holds ${parsed === null ? 'null' : Array.isArray(parsed) ? 'an array' : `a ${typeof parsed}`})`, 'corrupt-document');
    }
    return parsed as T;
  };
  const write = async (file: string, document: T) => {
    try {
      // A folder flush that failed after the rename is warned about, not thrown: the document is in place (atomic-file.ts).
      await writeFileAtomically(file, JSON.stringify(document, null, 2), onUnflushed);
    } catch (error) {
      throw new RegistryError(`registry could not write ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
  };
  const remove = async (file: string, id: string) => {
    try { await fsp.unlink(file); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw new RegistryError(`registry could not delete ${id}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
    // Until the folder is flushed a power loss may undo the unlink: a deleted workflow would take events again.
    // A flush that fails is warned about, not thrown, as writeFileAtomically does: the file is gone for every reader.
    try { await syncFolder(dir); } catch (error) {
      (onUnflushed ?? emitUnflushed)('a file was deleted, but its folder could not be flushed to disk: it is gone; a power loss before the folder is next flushed may bring it back', { file, error: (error as Error).message });
    }
    return true;
  };
  return {
    get: (id) => read(fileOf(id)),
    async put(document) {
      const file = fileOf(document.id);
      checkDocumentSize(name, document);
      return whileLocked(file, () => write(file, document));
    },
    async putIf(document, expected) {
      const file = fileOf(document.id);
      checkDocumentSize(name, document);
      return whileLocked(file, async () => {
        const stored = await read(file);
        if (stored === null ? expected !== null : expected === null || !sameDocument(stored, expected)) return false;
        await write(file, document);
        return true;
      });
    },
    async list() {
      const names = (await fsp.readdir(dir)).filter((n) => n.endsWith('.json') && !n.startsWith('.')).sort();
      const docs = await Promise.all(names.map((n) => read(path.join(dir, n))));
      return docs.filter((d): d is Awaited<T> => d !== null).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    },
    delete(id) {
      const file = fileOf(id);
      return whileLocked(file, () => remove(file, id));
    },
    deleteIf(expected) {
      const file = fileOf(expected.id);
      return whileLocked(file, async () => {
        const stored = await read(file);
        return stored !== null && sameDocument(stored, expected) && remove(file, expected.id);
      });
    },
  };
}
