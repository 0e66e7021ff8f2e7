import { constants, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { makeDirectories } from '../../platform/config/data-dir';
import { whileLockFile } from '../../platform/files/pid-lock';
import { writeFileAtomically } from '../../platform/registry/atomic-file';
import { oneAtATime } from './one-at-a-time';

/**
 * Which replay replayed each original, kept across restarts: what keeps a dead-letter replay from requesting an
 * execution twice through two of its letters, whether one replay reads both, two replays (one per letter, as the
 * console's Replay button asks) each read one, or the same letter is replayed again after its replay succeeded.
 *
 * An original is claimed by the first replay that selects a letter of it, and the claim is made durable (with the
 * dead-letter topic's end offsets then) with the batch that appends its copy, just before that append. A claim
 * taken earlier (a named letter, claimed when the request is checked) is held in memory only until then: a job
 * stopped before it reads that letter holds up nothing once it ends. From then on a letter of that
 * original is replayed again only if it was written after the claim's copy was appended (at or past those end
 * offsets in its partition): the copy failed again, so no execution came of it, and this letter is its failure.
 * A letter that was there before is a duplicate, whatever replay reads it. A resumed run of the claiming replay
 * finds its own claims here, so it needs no record of its own of what earlier runs selected.
 *
 * Bounded: at most `cap` originals (REPLAY_LEDGER_MAX_ORIGINALS). Past it a replay claims no new original and
 * skips its letters, counted (`unrecorded`), rather than forget a claim and risk replaying an original twice. A
 * claim is dropped only once no letter it guards is left: when retention has deleted them all (every partition's
 * first offset at or past the claim's end offsets), seen when the ledger is opened. Nothing is ever deleted from
 * the embedded log's dead-letter topic, so there no claim is dropped; no age would do instead, since every letter a
 * claim guards can be replayed for as long as it is there.
 *
 * Kept as JSON lines, one per committed batch of claims (`{"replay","ends","claims":[[original, letter], …]}`),
 * appended and synced; rewritten compact when opened. A last line cut short (a crash mid-write) was never followed
 * by its append, and is removed.
 *
 * Processes sharing DATA_DIR (two services, the CLI beside a service on Kafka) each keep a copy in memory, and
 * may each claim one original before either commits. So a commit is made under the file's pid lock
 * (`replayed-originals.jsonl.lock`), after taking in the lines others appended since this copy last read the file;
 * a claim another process committed meanwhile wins, and the loser's copy is withdrawn from its batch before the
 * append (counted a duplicate). Whoever commits first replays; nobody replays after.
 */
export interface ReplayClaim {
  /** The replay: a job's id (`dl-…`), or a direct `ingress dead-letters replay` run (`cli-…`). */
  replay: string;
  /** The dead letter it replays the original with, `<partition>/<offset>` in the dead-letter topic. */
  letter: string;
  /** The dead-letter topic's end offsets (per partition) as the copy was appended; null while it is not yet. */
  ends: Record<string, string> | null;
}

export type Verdict =
  | { replay: true }
  /** Its original is replayed by `by` (this replay with another letter, or an earlier one) and has not failed since. */
  | { replay: false; reason: 'duplicate'; by: ReplayClaim }
  /** The ledger is full: this replay cannot record the original, so does not replay it. */
  | { replay: false; reason: 'unrecorded' };

/**
 * The ledger's file holds a line that is not a batch of claims: repaired by hand, not by waiting (the API answers
 * 409, not 503 with Retry-After). I/O failures stay plain errors: they may pass.
 */
export class ReplayLedgerUnreadable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReplayLedgerUnreadable';
  }
}

/** A claim taken (in memory) that another process's replay committed first, and that its letter may not overrule. */
export interface LostClaim {
  original: string;
  letter: string;
  by: ReplayClaim;
}

export interface ReplayLedger {
  /** What `replay` may do with the letter at `letter` (`<partition>/<offset>`) of `original`, claiming it when it may. */
  take(original: string, replay: string, letter: string): Verdict;
  /** Take in the claims other processes committed to the file since the last look (before a request is checked). */
  refresh(): Promise<void>;
  /**
   * Make `replay`'s claims of `letters` (the batch about to be appended) durable, with the dead-letter topic's ends
   * now: before their copies are appended. Its other claims stay in memory (named letters its job has not read
   * yet): made durable with theirs, they would hold up their originals with no copy, and with ends too early.
   * Those another process committed meanwhile are not made: they are returned, and their copies must not be
   * appended.
   */
  commit(replay: string, letters: readonly string[], ends: Record<string, string>): Promise<LostClaim[]>;
  /** Forget `replay`'s claims that were not committed (its append did not happen): what they replaced holds again. */
  abandon(replay: string): void;
  readonly size: number;
  /** The most originals it keeps (REPLAY_LEDGER_MAX_ORIGINALS). */
  readonly cap: number;
}

/** The default of REPLAY_LEDGER_MAX_ORIGINALS: far above most dead-letter backlogs; 100 000 claims keep some 15 MB in memory. */
export const MAX_ORIGINALS = 100_000;
const MAX_FILE_BYTES = 256 * 1024 * 1024;
/** A commit holds the file's lock for one read of its tail and one synced append: a wait this long is a stuck holder. */
const LOCK_WAIT_MS = 10_000;

/** One line of the file: claims one replay committed together, with the dead-letter topic's ends then. */
interface Batch { replay: string; ends: Record<string, string>; claims: [string, string][] }

/**
 * Where the claims are kept. Several ledgers may keep them in one file (two services on one DATA_DIR, the CLI
 * beside the service on Kafka), each with its own copy in memory: each commit is made alone, under the file's
 * lock, after reading what the others appended since its last look.
 */
interface ClaimStore {
  /** Run `work` with no other ledger appending meanwhile, given the batches the others appended since the last look. */
  alone<T>(work: (others: Batch[]) => Promise<T>): Promise<T>;
  /** Append a line, synced; only within `alone`. */
  append(line: string): Promise<void>;
}

interface Pending { original: string; claim: ReplayClaim; replaced: ReplayClaim | undefined }

function ledger(claims: Map<string, ReplayClaim>, cap: number, store: ClaimStore): ReplayLedger {
  const pending = new Map<string, Pending[]>();
  const verdict = (original: string, replay: string, letter: string): Verdict => {
    const claim = claims.get(original);
    if (!claim) return claims.size >= cap ? { replay: false, reason: 'unrecorded' } : { replay: true };
    if (claim.replay === replay) return claim.letter === letter ? { replay: true } : { replay: false, reason: 'duplicate', by: claim };
    const [partition, offset] = letter.split('/');
    if (claim.ends !== null && BigInt(offset) >= BigInt(claim.ends[partition] ?? '0')) return { replay: true };
    return { replay: false, reason: 'duplicate', by: claim };
  };
  const release = (list: Pending[]) => {
    for (const p of [...list].reverse()) {
      if (claims.get(p.original) !== p.claim) continue;
      if (p.replaced) claims.set(p.original, p.replaced); else claims.delete(p.original);
    }
  };
  const abandon = (replay: string) => {
    release(pending.get(replay) ?? []);
    pending.delete(replay);
  };
  // Another process's claim replaces what this copy held, a claim pending here included: its commit came first.
  const takeIn = (others: Batch[]) => {
    for (const batch of others) for (const [original, letter] of batch.claims) claims.set(original, { replay: batch.replay, letter, ends: batch.ends });
  };
  // One commit at a time in this process too: the file's lock would make a second one poll for it.
  const inTurn = oneAtATime();
  return {
    get size() { return claims.size; },
    cap,
    take(original, replay, letter) {
      const answer = verdict(original, replay, letter);
      const held = claims.get(original);
      if (answer.replay && !(held?.replay === replay && held.letter === letter)) {
        const claim: ReplayClaim = { replay, letter, ends: null };
        const list = pending.get(replay) ?? [];
        list.push({ original, claim, replaced: held });
        pending.set(replay, list);
        claims.set(original, claim);
      }
      return answer;
    },
    refresh: () => inTurn(() => store.alone(async (others) => takeIn(others))),
    async commit(replay, letters, ends) {
      const inBatch = new Set(letters);
      const all = pending.get(replay) ?? [];
      const list = all.filter((p) => inBatch.has(p.claim.letter));
      if (!list.length) return [];
      const rest = all.filter((p) => !inBatch.has(p.claim.letter));
      if (rest.length > 0) pending.set(replay, rest); else pending.delete(replay);
      const lost: LostClaim[] = [];
      try {
        await inTurn(() => store.alone(async (others) => {
          takeIn(others);
          const kept = list.filter((p) => {
            const now = claims.get(p.original);
            if (now === p.claim) return true;
            // Committed by another process since this one took it: kept only if the letter came after that
            // claim's copy (that copy failed again), as a letter read after that commit would have been.
            const again = verdict(p.original, replay, p.claim.letter);
            if (again.replay) { claims.set(p.original, p.claim); return true; }
            lost.push({ original: p.original, letter: p.claim.letter, by: again.reason === 'duplicate' ? again.by : now ?? p.claim });
            return false;
          });
          if (kept.length > 0) await store.append(JSON.stringify({ replay, ends, claims: kept.map((p) => [p.original, p.claim.letter]) }));
        }));
      } catch (error) {
        // Not durable, so not appended either: the claims are let go rather than left to refuse others' letters.
        release(list);
        throw error;
      }
      for (const p of list) if (claims.get(p.original) === p.claim) p.claim.ends = ends;
      return lost;
    },
    abandon,
  };
}

/** Told what opening the ledger did that an operator should know (claims dropped; the ledger nearly full). */
export type LedgerNotice = (message: string, fields: Record<string, unknown>) => void;

/** A ledger kept in memory only (tests, and checks that replay nothing). */
export function memoryLedger(cap = MAX_ORIGINALS): ReplayLedger {
  return ledger(new Map(), cap, { alone: (work) => work([]), append: async () => undefined });
}

/**
 * The ledger in `file` (DATA_DIR/replay/replayed-originals.jsonl). `firsts`: the dead-letter topic's first offsets
 * now, by which claims whose letters are all deleted are dropped. Throws when the file cannot be read as one.
 */
export async function openReplayLedger(file: string, firsts: Record<string, string>, cap = MAX_ORIGINALS, notice?: LedgerNotice): Promise<ReplayLedger> {
  const store = fileStore(file);
  const claims = new Map<string, ReplayClaim>();
  await store.alone(async (batches) => {
    let kept = 0;
    for (const batch of batches) for (const [original, letter] of batch.claims) { claims.set(original, { replay: batch.replay, letter, ends: batch.ends }); kept++; }
    // Every letter a claim guards (those before its ends) is gone: it guards nothing any more.
    const gone = (ends: Record<string, string>) => Object.entries(ends).every(([p, end]) => BigInt(firsts[p] ?? '0') >= BigInt(end));
    for (const [original, claim] of claims) if (claim.ends && gone(claim.ends)) claims.delete(original);
    // Under the lock: a line another process appended between the read and the rename would be lost.
    if (kept !== claims.size) {
      await store.replace(compact(claims));
      notice?.('the replay ledger dropped claims whose dead letters retention has deleted', { file, dropped: kept - claims.size, kept: claims.size });
    }
  });
  // Said at each open (a service's first dead-letter replay, each direct run) rather than found out letter by letter.
  if (claims.size >= cap * 0.9) notice?.(`the replay ledger holds ${claims.size} of its ${cap} originals; past them, letters of new originals are not replayed (unrecorded) until REPLAY_LEDGER_MAX_ORIGINALS is raised`, { file });
  return ledger(claims, cap, store);
}

/** The file, read from where this ledger last read it: lines another process appended since, or all of it once replaced. */
function fileStore(file: string): ClaimStore & { replace(text: string): Promise<void> } {
  let seen: { offset: number; ino: number } | null = null;
  const failures = {
    couldNotLock: (error: unknown) => new Error(`the replay ledger's lock ${file}.lock could not be taken (${(error as Error).message})`),
    heldTooLong: (holder: number, waited: number) => new Error(`the replay ledger's lock ${file}.lock was held by process ${holder || '(starting)'} for more than ${waited} ms`),
  };
  const readNew = async (): Promise<Batch[]> => {
    let handle;
    try { handle = await fsp.open(file, constants.O_RDWR | constants.O_NONBLOCK); } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') { seen = null; return []; }
      throw new Error(`the replay ledger ${file} is unreadable (${(error as Error).message})`);
    }
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new Error(`the replay ledger ${file} is unreadable (not a regular file)`);
      // Replaced (compacted by a ledger opened since), or shorter than this one read: read whole again.
      const from = seen && seen.ino === stat.ino && seen.offset <= stat.size ? seen.offset : 0;
      if (stat.size - from > MAX_FILE_BYTES) throw new Error(`the replay ledger ${file} is unreadable (${stat.size} bytes, more than the ${MAX_FILE_BYTES} it holds)`);
      const buffer = Buffer.alloc(stat.size - from);
      for (let at = 0, bytesRead = -1; bytesRead !== 0 && at < buffer.length; at += bytesRead) {
        ({ bytesRead } = await handle.read(buffer, at, buffer.length - at, from + at));
      }
      const whole = buffer.lastIndexOf(0x0a) + 1;
      // A last line cut short (a crash mid-write) was never followed by its append: removed, so that the next line
      // appended does not join it into one that reads as neither. Only a ledger holding the lock gets here.
      if (whole < buffer.length) { await handle.truncate(from + whole); await handle.sync(); }
      const batches = parseLines(buffer.toString('utf8', 0, whole), file, from === 0);
      seen = { offset: from + whole, ino: stat.ino };
      return batches;
    } finally {
      await handle.close();
    }
  };
  const store = {
    async alone<T>(work: (others: Batch[]) => Promise<T>): Promise<T> {
      await makeDirectories(path.dirname(file));
      return whileLockFile(`${file}.lock`, LOCK_WAIT_MS, failures, async () => work(await readNew()));
    },
    async append(line: string) {
      const handle = await fsp.open(file, 'a');
      try {
        await handle.write(`${line}\n`);
        await handle.sync();
        const stat = await handle.stat();
        // Under the lock: nothing else was appended since readNew, so this ledger has read up to the end.
        seen = { offset: stat.size, ino: stat.ino };
      } finally {
        await handle.close();
      }
    },
    async replace(text: string) {
      await writeFileAtomically(file, text);
      const stat = await fsp.stat(file);
      seen = { offset: stat.size, ino: stat.ino };
    },
  };
  return store;
}

/** The batches of claims in `text` (whole lines); a line that is not one makes the ledger unreadable. */
function parseLines(text: string, file: string, fromStart: boolean): Batch[] {
  const batches: Batch[] = [];
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    if (line === '') return;
    try {
      const batch = JSON.parse(line) as Batch;
      // A claim with no ends (null) would read as one that "runs now", refusing every later letter of its request.
      const ends = batch?.ends as unknown;
      const endsOk = typeof ends === 'object' && ends !== null && !Array.isArray(ends) && Object.entries(ends).every(([p, end]) => /^\d+$/.test(p) && typeof end === 'string' && /^\d+$/.test(end));
      const claimsOk = Array.isArray(batch?.claims) && batch.claims.every((c) => Array.isArray(c) && c.length === 2 && typeof c[0] === 'string' && typeof c[1] === 'string');
      if (typeof batch?.replay !== 'string' || !endsOk || !claimsOk) throw new Error('not a batch of claims');
      batches.push(batch);
    } catch (error) {
      const where = fromStart ? `at line ${i + 1}` : 'in a line another process appended';
      throw new ReplayLedgerUnreadable(`the replay ledger ${file} is unreadable ${where} (${(error as Error).message}): it says which originals were replayed, so replays wait until it is repaired`);
    }
  });
  return batches;
}

/** The claims as lines again, one per replay and ends they share. */
function compact(claims: Map<string, ReplayClaim>): string {
  const batches = new Map<Record<string, string>, Batch>();
  for (const [original, claim] of claims) {
    const ends = claim.ends!;
    const batch = batches.get(ends) ?? { replay: claim.replay, ends, claims: [] };
    batch.claims.push([original, claim.letter]);
    batches.set(ends, batch);
  }
  return [...batches.values()].map((b) => `${JSON.stringify(b)}\n`).join('');
}
