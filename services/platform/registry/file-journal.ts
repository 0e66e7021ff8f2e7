import { hash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { makeDurableFolders } from '../files/durable-folders';
import { checkedQuery, matchesQuery, newestFirst, oldestFirst, type JournalEntry, type JournalQuery, type JournalStore } from './journal';
import { RegistryError } from './registry';

/**
 * The request journal of `npm start`, under DATA_DIR/registry/journal, one folder per UTC day:
 *
 *   <day>/entries-<writer>.jsonl   the entries, one JSON line each, appended by one open store (a writer)
 *   <day>/index-<bucket>.txt       `<key hash> <writer> <offset> <length>` per index key of an entry: its request,
 *                                  its workflow, each partner key; the bucket is the hash's first hex digit
 *   <day>/indexed-<writer>.txt     how many bytes of that writer's entries file the index holds durably
 *
 * Why this shape: the journal stage writes about three entries per request, at the pipeline's rate. A file per
 * entry (and a marker per key) cost ~2 ms of CPU and an fsync per request, which no receiver can keep up with;
 * here one `upsert` call (a stage batch) is one append and one fdatasync of the entries file, plus at most 16
 * small appends to the index buckets.
 * - Reads: a key search reads one bucket of each day in range (a sixteenth of the index) and then only the
 *   entries it names; a search without a key reads the days' entries files from their end, newest first, and
 *   stops at the limit. Pruning drops whole days.
 * - Upsert by id: a redelivered batch appends the same entries again (same ids, same content); readers keep
 *   one per id. Each open store appends to files of its own, so two processes sharing DATA_DIR never mix
 *   offsets; index lines are single O_APPEND writes.
 * - Crashes: entries are fdatasync'd before their index lines are written, and the stage commits its input
 *   only after upsert returns; a process killed in between meets the batch again and writes both again. An
 *   index line torn anywhere (a crash, a full disk) names nothing: one cut inside its length still parses, so a
 *   line counts only when the bytes it names are one whole line of the entries file.
 * - Power loss: fsyncing the index buckets with every batch would cost up to 16 more flushes a batch. They are
 *   fsync'd once a second instead (INDEX_SYNC_MS), and then the writer's checkpoint records how much of its
 *   entries file they cover. After an OS crash the index lines past a checkpoint may be gone: the next store
 *   that writes re-indexes every entries file from its checkpoint to its end before its first append. (A
 *   process crash loses no page cache: those entries are indexed twice, which readers collapse by id.)
 */
const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;
/** The largest time an entry may carry (year 9999). */
const MAX_AT = 253_402_300_799_999;
const ENTRY_ID = /^[A-Za-z0-9._-]{1,200}$/;
const ENTRIES = /^entries-([A-Za-z0-9]+)\.jsonl$/;
const BUCKET = /^index-[0-9a-f]\.txt$/;
/** How often the index buckets written since the last time are fsync'd and the writer's checkpoint moved. */
const INDEX_SYNC_MS = 1000;
/**
 * A search takes, from each day (from each file of a day, when it reads without a key), this many times its limit of the last written matches,
 * then orders them by time: the pipeline writes a request's entries within moments, so an entry written later
 * than these but older in time is far past the page. Exact for any page a day holds fewer matches than that.
 */
const PER_FILE_SLACK = 4;
/** How much of an entries file a search without a key reads at a time, from the end. */
const CHUNK = 1024 * 1024;

/** The UTC day of `at`; the last day named is kept, since a batch's entries almost all fall on one day. */
const dayOf = (() => {
  let from = 0;
  let to = -1;
  let name = '';
  return (at: number): string => {
    if (at >= from && at < to) return name;
    name = new Date(at).toISOString().slice(0, 10);
    from = at - (at % DAY_MS);
    to = from + DAY_MS;
    return name;
  };
})();
const hashOf = (key: string) => hash('sha256', key, 'hex').slice(0, 32);
/** A workflow's key comes back with most entries: its hash is kept (a bounded memo, emptied when full). */
const workflowHashes = new Map<string, string>();
const workflowHashOf = (key: string) => {
  let hashed = workflowHashes.get(key);
  if (hashed === undefined) {
    if (workflowHashes.size >= 10_000) workflowHashes.clear();
    workflowHashes.set(key, (hashed = hashOf(key)));
  }
  return hashed;
};
/** An index line: key hash, writer, offset and length of the entry in the writer's file. */
const INDEX_LINE = /^([0-9a-f]{32}) ([A-Za-z0-9]+) (\d{1,15}) (\d{1,15})$/;
const entriesFile = (writer: string) => `entries-${writer}.jsonl`;
const bucketFile = (hash: string) => `index-${hash[0]}.txt`;
const checkpointFile = (writer: string) => `indexed-${writer}.txt`;

interface DayFiles {
  handle: fsp.FileHandle;
  length: number;
  buckets: Map<string, fsp.FileHandle>;
  /** The length of the entries file that this writer's checkpoint says the index holds durably. */
  checkpointed: number;
  /** The buckets written since the checkpoint; null when not known (every bucket of the day, then). */
  dirty: Set<string> | null;
  /**
   * A bucket was opened (maybe created) since the day's folder was last fsync'd: its name is flushed before the
   * checkpoint moves past its lines, which a power loss would otherwise take with the name.
   */
  unsyncedNames: boolean;
}

function indexKeys(entry: JournalEntry): string[] {
  return [`request:${entry.requestId}`, ...(entry.workflowId !== null ? [`workflow:${entry.workflowId}`] : []), ...entry.keys.map((k) => `key:${k}`)];
}

/** Adds an entry's index lines (the entry at `offset`, `length` bytes, of `writer`'s file) to the text for each bucket. */
function addIndexLines(buckets: Map<string, string>, entry: JournalEntry, writer: string, offset: number, length: number): void {
  for (const key of indexKeys(entry)) {
    const hash = key.startsWith('workflow:') ? workflowHashOf(key) : hashOf(key);
    const bucket = bucketFile(hash);
    buckets.set(bucket, (buckets.get(bucket) ?? '') + `${hash} ${writer} ${offset} ${length}\n`);
  }
}

/** Replaces a small file's content and flushes it; a file this size is written in one sector. */
async function writeDurably(file: string, text: string): Promise<void> {
  const handle = await fsp.open(file, 'w', 0o600);
  try {
    await handle.writeFile(text, 'utf8');
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/** Makes the names just created in `dir` survive a power loss. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try { await handle.sync(); } finally { await handle.close(); }
}

/** The most selective index a query names, or null (a search by time only). */
function indexOfQuery(query: JournalQuery): string | null {
  if (query.requestId !== undefined) return `request:${query.requestId}`;
  if (query.key !== undefined) return `key:${query.key}`;
  if (query.workflowId !== undefined) return `workflow:${query.workflowId}`;
  return null;
}

export async function openFileJournal(root: string, retentionDays: number, options: { indexSyncMs?: number } = {}): Promise<JournalStore> {
  await makeDurableFolders(root);
  const writer = randomBytes(6).toString('hex');
  /**
   * This writer's entries file per day: its handle and its length (only this store appends to it), and the
   * index buckets it has opened for appending (kept open: opening and closing up to 16 of them per batch cost
   * more than writing them).
   */
  const open = new Map<string, DayFiles>();
  const closeDay = async (file: DayFiles | undefined) => {
    if (!file) return;
    await file.handle.close().catch(() => undefined);
    for (const bucket of file.buckets.values()) await bucket.close().catch(() => undefined);
  };
  /** Flushes the day's open index buckets, then moves this writer's checkpoint to what they cover. */
  const syncDay = async (day: string, file: DayFiles) => {
    if (file.checkpointed === file.length) return;
    const length = file.length;
    const dirty = file.dirty ?? (await listDir(path.join(root, day))).filter((name) => BUCKET.test(name));
    // fdatasync flushes a file whatever descriptor asks: a bucket closed since it was written is opened to ask.
    await Promise.all([...dirty].map(async (bucket) => {
      const kept = file.buckets.get(bucket);
      if (kept) return kept.datasync();
      const handle = await fsp.open(path.join(root, day, bucket), 'r');
      try { await handle.datasync(); } finally { await handle.close(); }
    }));
    if (file.unsyncedNames) {
      await syncDirectory(path.join(root, day));
      file.unsyncedNames = false;
    }
    await writeDurably(path.join(root, day, checkpointFile(writer)), String(length));
    file.dirty = new Set();
    file.checkpointed = length;
  };
  // Appends one after another: an entry's offset is the file's length before its write (the stages of every
  // topic share this store, and two writes in flight on one file could land in either order).
  let appending: Promise<unknown> = Promise.resolve();
  const unavailable = (what: string, error: unknown) =>
    new RegistryError(`journal could not ${what}: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
  const listDir = async (dir: string): Promise<string[]> => {
    try { return await fsp.readdir(dir); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw unavailable(`list ${dir}`, error);
    }
  };
  const readFileOrEmpty = async (file: string): Promise<Buffer> => {
    try { return await fsp.readFile(file); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return Buffer.alloc(0);
      throw unavailable(`read ${file}`, error);
    }
  };
  const parseOrTorn = (line: string): JournalEntry | null => {
    try { return JSON.parse(line) as JournalEntry; } catch { return null; }
  };
  /** The days kept, newest first, within [since, until) when given. */
  const days = async (since?: number, until?: number): Promise<string[]> => {
    const oldest = dayOf(Math.max(0, Date.now() - retentionDays * DAY_MS));
    const from = since !== undefined ? dayOf(Math.min(MAX_AT, Math.max(0, since))) : oldest;
    const to = until !== undefined ? dayOf(Math.min(MAX_AT, Math.max(0, until - 1))) : null;
    return (await listDir(root)).filter((d) => DAY.test(d) && d >= oldest && d >= from && (to === null || d <= to)).sort().reverse();
  };

  function checked(entry: JournalEntry): void {
    if (!ENTRY_ID.test(entry.id)) throw new RegistryError(`invalid journal entry id ${JSON.stringify(String(entry.id).slice(0, 220))}`, 'invalid-document');
    if (!Number.isSafeInteger(entry.at) || entry.at < 0 || entry.at > MAX_AT) throw new RegistryError(`journal entry ${entry.id}: at must be epoch milliseconds`, 'invalid-document');
  }

  async function dayFile(day: string) {
    let file = open.get(day);
    if (!file) {
      const dir = path.join(root, day);
      await fsp.mkdir(dir, { recursive: true });
      // The checkpoint exists before the entries file it covers (an entries file without one is a journal older
      // than checkpoints, which repairIndex leaves alone), and both names are flushed to the directory.
      const checkpoint = path.join(dir, checkpointFile(writer));
      const fresh = !fs.existsSync(checkpoint);
      if (fresh) await writeDurably(checkpoint, '0');
      const handle = await fsp.open(path.join(dir, entriesFile(writer)), 'a', 0o600);
      // The day's folder into the journal's too: another writer may have made it and not flushed that yet.
      if (fresh) { await syncDirectory(dir); await syncDirectory(root); }
      const length = (await handle.stat()).size;
      // A reopen after a failed write keeps the checkpoint it had; the next sync flushes every bucket of the day.
      file = { handle, length, buckets: new Map(), checkpointed: fresh ? 0 : -1, dirty: fresh ? new Set() : null, unsyncedNames: false };
      // Only the newest day keeps its index buckets open: a late entry for an older day opens them again.
      for (const other of open.values()) {
        for (const bucket of other.buckets.values()) await bucket.close().catch(() => undefined);
        other.buckets.clear();
      }
      open.set(day, file);
      // This writer's file is new; were it not (a reopen after a failed write), a torn last line is ended first.
      if (file.length > 0) {
        await handle.write('\n', null, 'utf8');
        file.length += 1;
      }
    }
    return file;
  }

  /** One day's entries: one append and one fdatasync, then their index lines, one append per bucket. */
  async function appendDay(day: string, entries: JournalEntry[]): Promise<void> {
    const file = await dayFile(day);
    const lines = entries.map((entry) => JSON.stringify(entry));
    const text = lines.join('\n') + '\n';
    const data = Buffer.from(text, 'utf8');
    // A text of as many bytes as characters is ASCII: each line's length is then its string's.
    const ascii = data.length === text.length;
    const buckets = new Map<string, string>();
    let offset = file.length;
    for (let i = 0; i < entries.length; i++) {
      const length = ascii ? lines[i].length : Buffer.byteLength(lines[i], 'utf8');
      addIndexLines(buckets, entries[i], writer, offset, length);
      offset += length + 1;
    }
    // A regular file may take fewer bytes than asked (a full disk): the rest goes after, or the write throws.
    for (let written = 0; written < data.length;) written += wrote((await file.handle.write(data, written, data.length - written, null)).bytesWritten);
    await file.handle.datasync();
    file.length += data.length;
    await Promise.all([...buckets].map(async ([bucket, lines]) => {
      let handle = file.buckets.get(bucket);
      // A bucket may end in a line torn by a failed write (a full disk) or a crash, this store's or another's:
      // the first write of a handle starts on a line of its own, so its first line is not merged into that one
      // (an empty line, when the bucket was whole, reads as nothing). In the same write: nothing lands between.
      const lead = handle ? '' : '\n';
      if (!handle) {
        file.buckets.set(bucket, (handle = await fsp.open(path.join(root, day, bucket), 'a', 0o600)));
        file.unsyncedNames = true;
      }
      file.dirty?.add(bucket);
      // One write of the file's handle opened for appending: O_APPEND, as appendFile was. Synchronous: a small
      // write to the page cache (flushed once a second, by syncDay) takes a microsecond or two of CPU, where a write
      // through the thread pool costs ten.
      const bytes = Buffer.from(lead + lines, 'utf8');
      for (let written = 0; written < bytes.length;) written += wrote(fs.writeSync(handle.fd, bytes, written, bytes.length - written));
    }));
  }

  /** What a writer's checkpoint says; null when it has none (its file predates checkpoints), 0 when it is unreadable. */
  async function checkpointOf(dir: string, of: string): Promise<number | null> {
    const text = (await readFileOrEmpty(path.join(dir, checkpointFile(of)))).toString('latin1');
    if (text === '' && !fs.existsSync(path.join(dir, checkpointFile(of)))) return null;
    return /^\d{1,15}$/.test(text) ? Number(text) : 0;
  }

  /**
   * Indexes again the entries of `of`'s file in `day` from `from` (a line's start) to its last whole line, and
   * flushes the buckets; returns where that last line ends. Lines that are no entry (torn) are skipped.
   */
  async function reindexTail(day: string, of: string, from: number): Promise<number> {
    const file = path.join(root, day, entriesFile(of));
    const handle = await fsp.open(file, 'r');
    const buckets = new Map<string, string>();
    let pending = 0;
    let opened = false;
    const flush = async () => {
      for (const [bucket, lines] of buckets) {
        opened = true;
        const out = await fsp.open(path.join(root, day, bucket), 'a', 0o600);
        try {
          // On a line of its own, as appendDay writes (a torn last line is ended, not continued).
          await out.writeFile('\n' + lines, 'utf8');
          await out.datasync();
        } finally {
          await out.close();
        }
      }
      buckets.clear();
      pending = 0;
    };
    let indexedTo = from;
    try {
      const size = (await handle.stat()).size;
      let carry = Buffer.alloc(0);
      for (let position = from; position < size;) {
        const chunk = Buffer.alloc(Math.min(CHUNK, size - position));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
        if (bytesRead === 0) break;
        position += bytesRead;
        const text = carry.length > 0 ? Buffer.concat([carry, chunk.subarray(0, bytesRead)]) : chunk.subarray(0, bytesRead);
        let start = 0;
        for (let end = text.indexOf(10); end >= 0; start = end + 1, end = text.indexOf(10, start)) {
          const entry = parseOrTorn(text.toString('utf8', start, end));
          if (entry !== null && typeof entry.requestId === 'string' && Array.isArray(entry.keys)) {
            addIndexLines(buckets, entry, of, indexedTo + start, end - start);
            pending += end - start;
          }
        }
        indexedTo += start;
        carry = Buffer.from(text.subarray(start));
        if (pending > CHUNK) await flush();
      }
      await flush();
      // Buckets it made are named durably before the caller's checkpoint moves past their lines.
      if (opened) await syncDirectory(path.join(root, day));
    } finally {
      await handle.close();
    }
    return indexedTo;
  }

  /**
   * Before this store's first append: every other writer's entries past its checkpoint are indexed again, as an
   * OS crash may have lost their index lines, and its checkpoint is moved past them.
   */
  async function repairIndex(): Promise<void> {
    for (const day of await days()) {
      const dir = path.join(root, day);
      for (const name of await listDir(dir)) {
        const match = ENTRIES.exec(name);
        if (!match || match[1] === writer) continue;
        const from = await checkpointOf(dir, match[1]);
        if (from === null) continue;
        const indexedTo = await reindexTail(day, match[1], from);
        if (indexedTo > from) await writeDurably(path.join(dir, checkpointFile(match[1])), String(indexedTo));
      }
    }
  }
  let repaired = false;

  /** Runs `work` between appends: no write is in flight on the files it touches. */
  const betweenAppends = <T>(work: () => Promise<T>): Promise<T> => {
    const done = appending.then(work, work);
    appending = done.catch(() => undefined);
    return done;
  };
  // A failed flush is tried again on the next tick; an append that fails says so to its caller.
  const syncTimer = setInterval(() => void betweenAppends(async () => {
    for (const [day, file] of open) await syncDay(day, file);
  }).catch(() => undefined), options.indexSyncMs ?? INDEX_SYNC_MS);
  syncTimer.unref();

  /**
   * The entries one day's index names for `key` that `keep` accepts, the last written first, at most `cap` of
   * them (appends come in time order, mostly: see PER_FILE_SLACK).
   */
  async function indexed(day: string, key: string, keep: (entry: JournalEntry) => boolean, cap = Infinity): Promise<JournalEntry[]> {
    const hash = hashOf(key);
    const bucket = `${day}/${bucketFile(hash)}`;
    const text = (await readFileOrEmpty(path.join(root, bucket))).toString('latin1');
    const wanted: { writer: string; offset: number; length: number; line: string }[] = [];
    for (const line of text.split('\n')) {
      if (!line.startsWith(hash)) continue;
      // A line a failed write or a crash left torn (and, before writers ended such a line, the line appended
      // onto it) names nothing: read as one, it gave a NaN length, and every search of the day threw.
      const whole = INDEX_LINE.exec(line);
      if (whole && whole[1] === hash) wanted.push({ writer: whole[2], offset: Number(whole[3]), length: Number(whole[4]), line });
    }
    const handles = new Map<string, fsp.FileHandle>();
    const found: JournalEntry[] = [];
    try {
      for (const { writer: w, offset, length, line } of wanted.reverse()) {
        if (found.length >= cap) break;
        let handle = handles.get(w);
        if (!handle) {
          const file = path.join(root, day, entriesFile(w));
          try { handle = await fsp.open(file, 'r'); } catch (error) {
            if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
            throw unavailable(`read ${file}`, error);
          }
          handles.set(w, handle);
        }
        // The entry with the newline before it and the one that ends it: a line is the index's only if those
        // bytes are one whole line of the entries file. An index line torn inside its length (a power loss cut
        // the bucket's unflushed tail, a full disk part of a write) still reads as a line, naming fewer bytes:
        // it names nothing, and the entry is found by the line written again (the batch retried, or the next
        // writer's repairIndex), not reported as a corrupt entries file for as long as the day is kept.
        const before = offset > 0 ? 1 : 0;
        const buffer = Buffer.alloc(before + length + 1);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset - before);
        // An index line whose entry is not there (a file cut short by a crash) names nothing.
        if (bytesRead !== buffer.length) continue;
        if ((before === 1 && buffer[0] !== 10) || buffer.indexOf(10, before) !== buffer.length - 1) continue;
        let entry: JournalEntry;
        try { entry = JSON.parse(buffer.toString('utf8', before, before + length)) as JournalEntry; } catch (error) {
          // One whole line that is no entry: the entries file is damaged, not the index.
          throw new RegistryError(`journal file ${day}/${entriesFile(w)} holds a line that is not valid JSON at byte ${offset} (${length} bytes), which the index line "${line}" of ${bucket} names`, 'corrupt-document', { cause: error });
        }
        if (keep(entry)) found.push(entry);
      }
    } finally {
      for (const h of handles.values()) await h.close().catch(() => undefined);
    }
    return found;
  }

  /** The entries of one day that `keep` accepts: each writer's file read backwards in chunks, at most `cap` from each. */
  async function scanned(day: string, keep: (entry: JournalEntry) => boolean, cap: number): Promise<JournalEntry[]> {
    const found: JournalEntry[] = [];
    for (const name of (await listDir(path.join(root, day))).filter((n) => ENTRIES.test(n))) {
      const file = path.join(root, day, name);
      let handle: fsp.FileHandle;
      try { handle = await fsp.open(file, 'r'); } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw unavailable(`read ${file}`, error);
      }
      let kept = 0;
      try {
        let end = (await handle.stat()).size;
        let carry = Buffer.alloc(0);
        while (end > 0 && kept < cap) {
          const start = Math.max(0, end - CHUNK);
          const chunk = Buffer.alloc(end - start);
          await handle.read(chunk, 0, chunk.length, start);
          const text = Buffer.concat([chunk, carry]);
          const firstBreak = start === 0 ? -1 : text.indexOf(10);
          carry = firstBreak < 0 ? Buffer.alloc(0) : text.subarray(0, firstBreak);
          const lines = text.subarray(firstBreak + 1).toString('utf8').split('\n');
          for (let i = lines.length - 1; i >= 0 && kept < cap; i--) {
            // A line a failed write left torn (or one being appended as this reads) is no entry: its batch is
            // written again whole.
            const entry = lines[i] === '' ? null : parseOrTorn(lines[i]);
            if (entry === null) continue;
            if (keep(entry)) { found.push(entry); kept++; }
          }
          end = start;
        }
      } finally {
        await handle.close();
      }
    }
    return found;
  }

  return {
    async upsert(entries) {
      if (entries.length === 0) return;
      entries.forEach(checked);
      const byDay = new Map<string, JournalEntry[]>();
      for (const entry of entries) {
        const day = dayOf(entry.at);
        const list = byDay.get(day);
        if (list) list.push(entry);
        else byDay.set(day, [entry]);
      }
      const append = async () => {
        try {
          if (!repaired) {
            await repairIndex();
            repaired = true;
          }
          for (const [day, list] of byDay) await appendDay(day, list);
        } catch (error) {
          // A day pruned under us (or a failed write) starts that day's file again on the next attempt, whose
          // offsets then count from the new file's length.
          for (const day of byDay.keys()) {
            const file = open.get(day);
            open.delete(day);
            await closeDay(file);
          }
          throw unavailable(`write ${entries.length} entries`, error);
        }
      };
      await betweenAppends(append);
    },

    async request(requestId) {
      const found = new Map<string, JournalEntry>();
      for (const day of await days()) {
        for (const entry of await indexed(day, `request:${requestId}`, (e) => e.requestId === requestId)) found.set(entry.id, entry);
      }
      return [...found.values()].sort(oldestFirst);
    },

    async search(raw) {
      const query = checkedQuery(raw);
      const index = indexOfQuery(query);
      const found = new Map<string, JournalEntry>();
      const keep = (entry: JournalEntry) => matchesQuery(entry, query);
      const cap = query.limit * PER_FILE_SLACK;
      for (const day of await days(query.since, query.until)) {
        const ofDay = index !== null ? await indexed(day, index, keep, cap) : await scanned(day, keep, cap);
        for (const entry of ofDay) found.set(entry.id, entry);
        // Days are newest first: a day that filled the page leaves older days nothing to add.
        if (found.size >= query.limit) break;
      }
      return [...found.values()].sort(newestFirst).slice(0, query.limit);
    },

    async prune(before) {
      const cutoff = dayOf(Math.max(0, before));
      // Between appends, so that no write is in flight on a file whose day goes.
      const drop = async () => {
        let dropped = 0;
        for (const day of (await listDir(root)).filter((d) => DAY.test(d) && d < cutoff)) {
          const file = open.get(day);
          open.delete(day);
          await closeDay(file);
          try { await fsp.rm(path.join(root, day), { recursive: true, force: true }); } catch (error) { throw unavailable(`prune ${day}`, error); }
          dropped++;
        }
        return dropped;
      };
      return betweenAppends(drop);
    },

    async close() {
      clearInterval(syncTimer);
      await betweenAppends(async () => {
        const files = [...open];
        open.clear();
        for (const [day, file] of files) {
          await syncDay(day, file).catch(() => undefined); // not flushed: the next writer indexes them again
          await closeDay(file);
        }
      });
    },
  };
}

/** Bytes a write took; none at all would loop for ever. */
function wrote(bytes: number): number {
  if (bytes <= 0) throw new RegistryError('the request journal could not be written: the file system took no bytes', 'registry-unavailable');
  return bytes;
}
