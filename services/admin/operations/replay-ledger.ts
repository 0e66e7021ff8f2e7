import { promises as fsp } from 'node:fs';
import { readRegularFile } from '../../platform/files/read-regular-file';
import { ObjectStoreError, type ObjectStore } from '../../platform/store/object-store';
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
 * Kept in the object store, where every process of a deployment finds it whatever its DATA_DIR (replicas on
 * Kafka, the CLI on an operator's machine): `replay/ledger/<dead-letter topic>/<number>.json`, one object per
 * committed batch of claims (`{"replay","ends","claims":[[original, letter], …]}`), numbered from 1 in 12 digits.
 * Each process keeps a copy in memory, and processes may each claim one original before either commits. So a
 * commit reads the batches others created since its copy last looked, decides, and creates the next number with
 * `ifAbsent`: the store lets one creator have each number. One that finds its number taken reads again and
 * decides again: a claim another process committed meanwhile wins, and the loser's copy is withdrawn from its
 * batch before the append (counted a duplicate). Whoever commits first replays; nobody replays after. Objects
 * whose claims retention has made void are deleted when a ledger is opened, except the last (whose number tells
 * the next creator where to go on).
 *
 * An earlier release kept the ledger in DATA_DIR/replay/replayed-originals.jsonl, one line per batch: a ledger
 * opened with that file beside it takes its lines in as batches, then renames it `….imported`.
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
 * An object of the ledger (or a line of a legacy file) is not a batch of claims: repaired by hand, not by waiting
 * (the API answers 409, not 503 with Retry-After). I/O failures stay plain errors: they may pass.
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
  /** Take in the claims other processes committed since the last look (before a request is checked). */
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
/** A legacy ledger file larger than this is refused rather than read: 100 000 claims are some 10 MB of lines. */
const MAX_LEGACY_BYTES = 256 * 1024 * 1024;
/** How often a commit may find its number taken and try again before it gives up (503): contention this long is a fault. */
const MAX_ATTEMPTS = 50;

/** One object (one line of a legacy file): claims one replay committed together, with the dead-letter topic's ends then. */
interface Batch { replay: string; ends: Record<string, string>; claims: [string, string][] }

/**
 * Where the claims are kept. Several ledgers keep them in one place (every process of a deployment), each with its
 * own copy in memory: each commit is decided on every batch the others appended before it.
 */
interface ClaimStore {
  /**
   * Run `work` given the batches the others appended since the last look, as if no other ledger appended
   * meanwhile: when one did, `work` is run again, with the batches it missed. So `work` must decide afresh each time.
   */
  alone<T>(work: (others: Batch[]) => Promise<T>): Promise<T>;
  /** Append a batch, durably; only within `alone`, once. */
  append(batch: Batch): Promise<void>;
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
  // One commit at a time in this process too: a second one at once would only find its number taken.
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
          lost.length = 0; // decided again when another ledger appended first
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
          if (kept.length > 0) await store.append({ replay, ends, claims: kept.map((p) => [p.original, p.claim.letter]) });
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

/** Told what opening the ledger did that an operator should know (claims dropped; the ledger nearly full; a legacy file taken in). */
export type LedgerNotice = (message: string, fields: Record<string, unknown>) => void;

/** A ledger kept in memory only (tests, and checks that replay nothing). */
export function memoryLedger(cap = MAX_ORIGINALS): ReplayLedger {
  return ledger(new Map(), cap, { alone: (work) => work([]), append: async () => undefined });
}

export interface LedgerOptions {
  /** The dead-letter topic whose letters it guards: the ledger of each topic is apart (deployments may share a store). */
  deadLetterTopic: string;
  /** The dead-letter topic's first offsets now, by which claims whose letters are all deleted are dropped. */
  firsts: Record<string, string>;
  cap?: number;
  notice?: LedgerNotice;
  /** An earlier release's ledger file (DATA_DIR/replay/replayed-originals.jsonl), taken in when there. */
  legacyFile?: string;
}

/**
 * The ledger of `deadLetterTopic` in `objects`. Throws ReplayLedgerUnreadable when an object in its place is not a
 * batch of claims, and other errors when the store cannot be read.
 */
export async function openReplayLedger(objects: ObjectStore, options: LedgerOptions): Promise<ReplayLedger> {
  const { firsts, cap = MAX_ORIGINALS, notice } = options;
  const prefix = `replay/ledger/${options.deadLetterTopic}/`;
  // Through a copy of its own: the ledger below reads every batch, those taken in too.
  if (options.legacyFile) await takeInLegacy(options.legacyFile, objectClaims(objects, prefix), notice);
  const store = objectClaims(objects, prefix);
  const claims = new Map<string, ReplayClaim>();
  const read = await store.alone(async (batches) => batches);
  let kept = 0;
  for (const batch of read) for (const [original, letter] of batch.claims) { claims.set(original, { replay: batch.replay, letter, ends: batch.ends }); kept++; }
  // Every letter a claim guards (those before its ends) is gone: it guards nothing any more.
  const gone = (ends: Record<string, string>) => Object.entries(ends).every(([p, end]) => BigInt(firsts[p] ?? '0') >= BigInt(end));
  for (const [original, claim] of claims) if (claim.ends && gone(claim.ends)) claims.delete(original);
  const deleted = await store.deleteVoid(gone);
  if (kept !== claims.size) notice?.('the replay ledger dropped claims whose dead letters retention has deleted', { dropped: kept - claims.size, kept: claims.size, objectsDeleted: deleted });
  // Said at each open (a service's first dead-letter replay, each direct run) rather than found out letter by letter.
  if (claims.size >= cap * 0.9) notice?.(`the replay ledger holds ${claims.size} of its ${cap} originals; past them, letters of new originals are not replayed (unrecorded) until REPLAY_LEDGER_MAX_ORIGINALS is raised`, { deadLetterTopic: options.deadLetterTopic });
  return ledger(claims, cap, store);
}

/** Thrown by `append` when another ledger created the number first: `alone` reads again and decides again. */
class NumberTaken extends Error {}

const NAME = /^(\d{12})\.json$/;

/** The batches as objects under `prefix`, numbered; read from the number after the last this ledger read. */
function objectClaims(objects: ObjectStore, prefix: string): ClaimStore & { deleteVoid(gone: (ends: Record<string, string>) => boolean): Promise<number> } {
  let last = 0;
  /** The batch of each number read, kept by number only until the ledger is opened (deleteVoid lets them go). */
  let read: Map<number, Batch> | null = new Map();
  const nameOf = (n: number) => `${prefix}${String(n).padStart(12, '0')}.json`;
  const numbers = async (): Promise<number[]> => {
    const found: number[] = [];
    for await (const name of objects.list(prefix)) {
      const match = NAME.exec(name.slice(prefix.length));
      if (match) found.push(Number(match[1]));
    }
    return found.sort((a, b) => a - b);
  };
  const readBatch = async (n: number): Promise<Batch | null> => {
    let content: Buffer;
    try { ({ content } = await objects.readVersioned(nameOf(n))); } catch (error) {
      // Deleted since it was listed: only ever a batch whose claims retention made void (deleteVoid), which guards nothing.
      if (error instanceof ObjectStoreError && error.code === 'not-found') return null;
      if (error instanceof ObjectStoreError && error.code === 'too-large') throw unreadable(nameOf(n), 'larger than a batch of claims');
      throw error;
    }
    try { return parseBatch(content.toString('utf8')); } catch (error) { throw unreadable(nameOf(n), (error as Error).message); }
  };
  /**
   * The batches created since this copy last read. `last` only ever becomes a number this copy read, and the newest
   * one listed: a number is deleted only below a later one (deleteVoid), so the newest listed found deleted when read
   * means the list is stale (a later one exists), and it lists again. Taking a listed number it could not read for
   * its `last` (as it did until 2026-11-28) made its next create land on a number deleted as void, past batches it
   * never read: their requests replayed twice. Not guarded: two batches created after this list, the first made void
   * by retention and deleted by an open elsewhere, all before this copy creates (milliseconds).
   */
  const readNew = async (): Promise<Batch[]> => {
    const batches: Batch[] = [];
    for (let round = 1; ; round++) {
      const fresh = (await numbers()).filter((n) => n > last);
      if (fresh.length === 0) return batches;
      let top = false;
      // A few at a time: a ledger opened reads every object, and an object store answers each in milliseconds.
      for (let i = 0; i < fresh.length; i += 8) {
        const some = await Promise.all(fresh.slice(i, i + 8).map(readBatch));
        some.forEach((batch, j) => {
          if (!batch) return;
          batches.push(batch);
          read?.set(fresh[i + j], batch);
          last = fresh[i + j];
          top = fresh[i + j] === fresh[fresh.length - 1];
        });
      }
      if (top) return batches;
      if (round >= MAX_ATTEMPTS) throw new Error(`the replay ledger ${prefix} could not be read: ${MAX_ATTEMPTS} times its newest object was deleted as it was read`);
    }
  };
  return {
    async alone(work) {
      for (let attempt = 1; ; attempt++) {
        const others = await readNew();
        try { return await work(others); } catch (error) {
          if (!(error instanceof NumberTaken)) throw error;
          if (attempt >= MAX_ATTEMPTS) throw new Error(`the replay ledger ${prefix} could not be appended to: ${MAX_ATTEMPTS} times another process appended first`);
        }
      }
    },
    async append(batch) {
      try {
        await objects.put(nameOf(last + 1), Buffer.from(JSON.stringify(batch)), { ifAbsent: true, contentType: 'application/json' });
      } catch (error) {
        if (error instanceof ObjectStoreError && error.code === 'already-exists') throw new NumberTaken();
        throw error;
      }
      last += 1;
    },
    // Not the last: the next number is found from it. Deleting one another ledger has not read yet loses nothing it
    // needs, since every claim in it is void.
    async deleteVoid(gone) {
      const batches = read ?? new Map<number, Batch>();
      read = null;
      let deleted = 0;
      for (const [n, batch] of batches) if (n < last && gone(batch.ends) && await objects.delete(nameOf(n))) deleted++;
      return deleted;
    },
  };
}

/** An earlier release's ledger file, taken in batch by batch (a last line cut short by a crash was never appended), then renamed. */
async function takeInLegacy(file: string, store: ClaimStore, notice?: LedgerNotice): Promise<void> {
  let text: string;
  try { text = await readRegularFile(file, MAX_LEGACY_BYTES); } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw new Error(`the replay ledger ${file} (an earlier release's) is unreadable (${(error as Error).message})`);
  }
  const lines = text.slice(0, text.lastIndexOf('\n') + 1).split('\n');
  const batches = lines.flatMap((line, i) => {
    if (line === '') return [];
    try { return [parseBatch(line)]; } catch (error) { throw unreadable(`${file} at line ${i + 1}`, (error as Error).message); }
  });
  // Taken in twice (two processes on one DATA_DIR at once, or a kill before the rename) is harmless: the same claims again.
  for (const batch of batches) await store.alone(() => store.append(batch));
  await fsp.rename(file, `${file}.imported`);
  notice?.('the replay ledger took in an earlier release\'s file', { file, batches: batches.length, renamedTo: `${file}.imported` });
}

function unreadable(where: string, why: string): ReplayLedgerUnreadable {
  return new ReplayLedgerUnreadable(`the replay ledger ${where} is unreadable (${why}): it says which originals were replayed, so replays wait until it is repaired`);
}

/** A batch of claims, or an error saying why the text is not one. */
function parseBatch(text: string): Batch {
  const batch = JSON.parse(text) as Batch;
  // A claim with no ends (null) would read as one that "runs now", refusing every later letter of its request.
  const ends = batch?.ends as unknown;
  const endsOk = typeof ends === 'object' && ends !== null && !Array.isArray(ends) && Object.entries(ends).every(([p, end]) => /^\d+$/.test(p) && typeof end === 'string' && /^\d+$/.test(end));
  const claimsOk = Array.isArray(batch?.claims) && batch.claims.every((c) => Array.isArray(c) && c.length === 2 && typeof c[0] === 'string' && typeof c[1] === 'string');
  if (typeof batch?.replay !== 'string' || !endsOk || !claimsOk) throw new Error('not a batch of claims');
  return { replay: batch.replay, ends: batch.ends, claims: batch.claims };
}
