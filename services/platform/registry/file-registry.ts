import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { DOCUMENT_ID, RegistryError, withSamples, type Document, type DocumentCollection, type Registry, type Sample } from './registry';
import type { StoredCredential, WorkflowDocument } from './documents';
import { writeFileAtomically } from './atomic-file';
import { openFileJournal } from './file-journal';
import { DEFAULT_JOURNAL_RETENTION_DAYS } from './journal';

/**
 * The Registry of `npm start`: one JSON file per document under DATA_DIR/registry/<collection>/,
 * replaced atomically (temp file, fsync, rename), so the CLI in another process can write while the
 * service reads.
 */
export interface FileRegistryOptions {
  /** Days the request journal keeps an entry (JOURNAL_RETENTION_DAYS); the journal stage prunes older days. */
  journalRetentionDays?: number;
}

export async function openFileRegistry(dataDir: string, options: FileRegistryOptions = {}): Promise<Registry> {
  const root = path.resolve(dataDir, 'registry');
  const workflows = await fileCollection<WorkflowDocument>(path.join(root, 'workflows'));
  const credentials = await fileCollection<StoredCredential>(path.join(root, 'credentials'));
  const samples = await fileCollection<{ id: string; samples: Sample[] }>(path.join(root, 'samples'));
  const sampleId = (workflowId: string, node: string) => `${workflowId}.${Buffer.from(node, 'utf8').toString('base64url')}`;
  // The sampler is this document's only writer (one thread of one service per DATA_DIR), so read, merge and
  // replace need no lock; the replace is atomic for readers in any thread or process (temp file, fsync, rename).
  const appendMany = async (workflowId: string, node: string, added: readonly Sample[], keep: number) => {
    const id = sampleId(workflowId, node);
    const next = withSamples((await samples.get(id))?.samples ?? [], added, keep);
    if (next) await samples.put({ id, samples: next });
  };
  const journal = await openFileJournal(path.join(root, 'journal'), options.journalRetentionDays ?? DEFAULT_JOURNAL_RETENTION_DAYS);
  return {
    kind: 'file',
    workflows,
    credentials,
    samples: {
      append(workflowId, node, sample, keep) {
        return appendMany(workflowId, node, [sample], keep);
      },
      appendMany,
      async list(workflowId, node) {
        return (await samples.get(sampleId(workflowId, node)))?.samples ?? [];
      },
    },
    journal,
    async close() { await journal.close?.(); },
  };
}

async function fileCollection<T extends Document>(dir: string): Promise<DocumentCollection<T>> {
  await fsp.mkdir(dir, { recursive: true });
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
    try { return JSON.parse(text) as T; } catch (error) {
      throw new RegistryError(`registry file ${file} is not valid JSON`, 'corrupt-document', { cause: error });
    }
  };
  return {
    get: (id) => read(fileOf(id)),
    async put(document) {
      const file = fileOf(document.id);
      try {
        await writeFileAtomically(file, JSON.stringify(document, null, 2));
      } catch (error) {
        throw new RegistryError(`registry could not write ${file}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
      }
    },
    async list() {
      const names = (await fsp.readdir(dir)).filter((n) => n.endsWith('.json') && !n.startsWith('.')).sort();
      const docs = await Promise.all(names.map((n) => read(path.join(dir, n))));
      return docs.filter((d): d is Awaited<T> => d !== null).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    },
    async delete(id) {
      try { await fsp.unlink(fileOf(id)); return true; } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw new RegistryError(`registry could not delete ${id}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
      }
    },
  };
}
