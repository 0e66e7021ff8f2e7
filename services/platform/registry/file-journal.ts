import { createHash } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { writeFileAtomically } from './atomic-file';
import { checkedQuery, matchesQuery, newestFirst, oldestFirst, type JournalEntry, type JournalStore } from './journal';
import { RegistryError } from './registry';

/**
 * The request journal of `npm start`, under DATA_DIR/registry/journal, one folder per UTC day:
 *
 *   <day>/entries/<at>-<id>.json   one entry, replaced atomically (atomic-file.ts)
 *   <day>/by/<hash>/<at>-<id>      an empty marker per index key: the request, the workflow, each partner key
 *
 * Why this shape: a search reads only the days its time range (and the retention) covers, and within a day
 * only the markers of the most selective criterion given, then the entries those name; a day's names sort by
 * time, so newest first stops at the page limit. Pruning drops whole days. An entry is written before its
 * markers, so a marker always finds its entry once both exist; one without (a crash in between) is skipped,
 * and the redelivery that follows such a crash writes both again.
 */
const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;
/** The largest time an entry may carry (year 9999): fifteen digits, zero-padded so that names sort by time. */
const MAX_AT = 253_402_300_799_999;
const AT_DIGITS = 15;

const dayOf = (at: number) => new Date(at).toISOString().slice(0, 10);
const nameOf = (entry: JournalEntry) => `${String(entry.at).padStart(AT_DIGITS, '0')}-${entry.id}`;
const atOfName = (name: string) => Number(name.slice(0, AT_DIGITS));
const indexOf = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex').slice(0, 40);
const ENTRY_ID = /^[A-Za-z0-9._-]{1,200}$/;

function indexKeys(entry: JournalEntry): string[] {
  return [`request:${entry.requestId}`, ...(entry.workflowId !== null ? [`workflow:${entry.workflowId}`] : []), ...entry.keys.map((k) => `key:${k}`)];
}

export async function openFileJournal(root: string, retentionDays: number): Promise<JournalStore> {
  await fsp.mkdir(root, { recursive: true });
  const made = new Set<string>();
  const ensureDir = async (dir: string) => {
    if (made.has(dir)) return;
    await fsp.mkdir(dir, { recursive: true });
    made.add(dir);
  };
  const unavailable = (what: string, error: unknown) =>
    new RegistryError(`journal could not ${what}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
  const listDir = async (dir: string): Promise<string[]> => {
    try { return (await fsp.readdir(dir)).filter((n) => !n.startsWith('.')); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw unavailable(`list ${dir}`, error);
    }
  };
  const readEntry = async (day: string, name: string): Promise<JournalEntry | null> => {
    const file = path.join(root, day, 'entries', `${name}.json`);
    let text: string;
    try { text = await fsp.readFile(file, 'utf8'); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw unavailable(`read ${file}`, error);
    }
    try { return JSON.parse(text) as JournalEntry; } catch (error) {
      throw new RegistryError(`journal file ${file} is not valid JSON`, 'corrupt-document', { cause: error });
    }
  };
  /** The days kept, newest first, within [since, until) when given. */
  const days = async (since?: number, until?: number): Promise<string[]> => {
    const oldest = dayOf(Math.max(0, Date.now() - retentionDays * DAY_MS));
    const from = since !== undefined ? dayOf(Math.min(MAX_AT, Math.max(0, since))) : oldest;
    const to = until !== undefined ? dayOf(Math.min(MAX_AT, Math.max(0, until - 1))) : null;
    return (await listDir(root)).filter((d) => DAY.test(d) && d >= oldest && d >= from && (to === null || d <= to)).sort().reverse();
  };

  async function write(entry: JournalEntry): Promise<void> {
    if (!ENTRY_ID.test(entry.id)) throw new RegistryError(`invalid journal entry id ${JSON.stringify(String(entry.id).slice(0, 220))}`, 'invalid-document');
    if (!Number.isSafeInteger(entry.at) || entry.at < 0 || entry.at > MAX_AT) throw new RegistryError(`journal entry ${entry.id}: at must be epoch milliseconds`, 'invalid-document');
    const day = dayOf(entry.at);
    const name = nameOf(entry);
    const entries = path.join(root, day, 'entries');
    try {
      await ensureDir(entries);
      await writeFileAtomically(path.join(entries, `${name}.json`), JSON.stringify(entry));
      for (const key of indexKeys(entry)) {
        const dir = path.join(root, day, 'by', indexOf(key));
        await ensureDir(dir);
        await fsp.writeFile(path.join(dir, name), '');
      }
    } catch (error) {
      // A folder pruned under us is made again on the next attempt.
      made.clear();
      throw unavailable(`write entry ${entry.id}`, error);
    }
  }

  return {
    async upsert(entries) {
      await Promise.all(entries.map(write));
    },

    async request(requestId) {
      const found: JournalEntry[] = [];
      for (const day of await days()) {
        for (const name of await listDir(path.join(root, day, 'by', indexOf(`request:${requestId}`)))) {
          const entry = await readEntry(day, name);
          if (entry && entry.requestId === requestId) found.push(entry);
        }
      }
      return found.sort(oldestFirst);
    },

    async search(raw) {
      const query = checkedQuery(raw);
      // The most selective index given; with none, a day's entries themselves.
      const index = query.requestId !== undefined ? `request:${query.requestId}` : query.key !== undefined ? `key:${query.key}` : query.workflowId !== undefined ? `workflow:${query.workflowId}` : null;
      const found: JournalEntry[] = [];
      for (const day of await days(query.since, query.until)) {
        const names = index !== null
          ? await listDir(path.join(root, day, 'by', indexOf(index)))
          : (await listDir(path.join(root, day, 'entries'))).filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5));
        names.sort().reverse();
        for (const name of names) {
          const at = atOfName(name);
          if ((query.until !== undefined && at >= query.until) || (query.since !== undefined && at < query.since)) continue;
          const entry = await readEntry(day, name);
          if (entry && matchesQuery(entry, query)) found.push(entry);
          if (found.length >= query.limit) return found.sort(newestFirst);
        }
      }
      return found.sort(newestFirst);
    },

    async prune(before) {
      const cutoff = dayOf(Math.max(0, before));
      let dropped = 0;
      for (const day of (await listDir(root)).filter((d) => DAY.test(d) && d < cutoff)) {
        try { await fsp.rm(path.join(root, day), { recursive: true, force: true }); } catch (error) { throw unavailable(`prune ${day}`, error); }
        dropped++;
      }
      made.clear();
      return dropped;
    },
  };
}
