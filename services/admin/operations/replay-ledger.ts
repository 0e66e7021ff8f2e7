import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { makeDirectories } from '../../platform/config/data-dir';
import { readRegularFile } from '../../platform/files/read-regular-file';
import { writeFileAtomically } from '../../platform/registry/atomic-file';

/**
 * Which replay replayed each original, kept across restarts: what keeps a dead-letter replay from requesting an
 * execution twice through two of its letters, whether one replay reads both, two replays (one per letter, as the
 * console's Replay button asks) each read one, or the same letter is replayed again after its replay succeeded.
 *
 * An original is claimed by the first replay that selects a letter of it, and the claim is made durable (with the
 * dead-letter topic's end offsets then) before that replay appends its copy. From then on a letter of that
 * original is replayed again only if it was written after the claim's copy was appended (at or past those end
 * offsets in its partition): the copy failed again, so no execution came of it, and this letter is its failure.
 * A letter that was there before is a duplicate, whatever replay reads it. A resumed run of the claiming replay
 * finds its own claims here, so it needs no record of its own of what earlier runs selected.
 *
 * Bounded: at most `cap` originals. Past it a replay claims no new original and skips its letters, counted
 * (`unrecorded`), rather than forget a claim and risk replaying an original twice. Claims whose letters retention
 * has deleted (every partition's first offset past the claim's end offsets) are dropped when the ledger is opened:
 * no letter that they guard is left.
 *
 * Kept as JSON lines, one per committed batch of claims (`{"replay","ends","claims":[[original, letter], …]}`),
 * appended and synced; rewritten compact when opened. A last line cut short (a crash mid-write) was never followed
 * by its append, and is dropped.
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

export interface ReplayLedger {
  /** What `replay` may do with the letter at `letter` (`<partition>/<offset>`) of `original`, claiming it when it may. */
  take(original: string, replay: string, letter: string): Verdict;
  /** The same verdict, claiming nothing (a request checked before its job starts). */
  check(original: string, replay: string, letter: string): Verdict;
  /** Make `replay`'s claims since its last commit durable, with the dead-letter topic's ends: before their copies are appended. */
  commit(replay: string, ends: Record<string, string>): Promise<void>;
  /** Forget `replay`'s claims that were not committed (its append did not happen): what they replaced holds again. */
  abandon(replay: string): void;
  readonly size: number;
}

/** Far above any dead-letter backlog one replays by hand; 100 000 claims keep some 15 MB in memory. */
export const MAX_ORIGINALS = 100_000;
const MAX_FILE_BYTES = 256 * 1024 * 1024;

interface Pending { original: string; claim: ReplayClaim; replaced: ReplayClaim | undefined }

function ledger(claims: Map<string, ReplayClaim>, cap: number, persist: (line: string) => Promise<void>): ReplayLedger {
  const pending = new Map<string, Pending[]>();
  const verdict = (original: string, replay: string, letter: string): Verdict => {
    const claim = claims.get(original);
    if (!claim) return claims.size >= cap ? { replay: false, reason: 'unrecorded' } : { replay: true };
    if (claim.replay === replay) return claim.letter === letter ? { replay: true } : { replay: false, reason: 'duplicate', by: claim };
    const [partition, offset] = letter.split('/');
    if (claim.ends !== null && BigInt(offset) >= BigInt(claim.ends[partition] ?? '0')) return { replay: true };
    return { replay: false, reason: 'duplicate', by: claim };
  };
  const abandon = (replay: string) => {
    for (const p of (pending.get(replay) ?? []).reverse()) {
      if (claims.get(p.original) !== p.claim) continue;
      if (p.replaced) claims.set(p.original, p.replaced); else claims.delete(p.original);
    }
    pending.delete(replay);
  };
  let writing: Promise<unknown> = Promise.resolve();
  return {
    get size() { return claims.size; },
    check: verdict,
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
    async commit(replay, ends) {
      const list = pending.get(replay);
      if (!list?.length) return;
      pending.delete(replay);
      const line = JSON.stringify({ replay, ends, claims: list.map((p) => [p.original, p.claim.letter]) });
      const written = writing.then(() => persist(line));
      writing = written.catch(() => undefined);
      try {
        await written;
      } catch (error) {
        // Not durable, so not appended either: the claims are let go rather than left to refuse others' letters.
        pending.set(replay, list);
        abandon(replay);
        throw error;
      }
      for (const p of list) p.claim.ends = ends;
    },
    abandon,
  };
}

/** A ledger kept in memory only (tests, and checks that replay nothing). */
export function memoryLedger(cap = MAX_ORIGINALS): ReplayLedger {
  return ledger(new Map(), cap, async () => undefined);
}

/**
 * The ledger in `file` (DATA_DIR/replay/replayed-originals.jsonl). `firsts`: the dead-letter topic's first offsets
 * now, by which claims whose letters are all deleted are dropped. Throws when the file cannot be read as one.
 */
export async function openReplayLedger(file: string, firsts: Record<string, string>, cap = MAX_ORIGINALS): Promise<ReplayLedger> {
  let text = '';
  try { text = await readRegularFile(file, MAX_FILE_BYTES); } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`the replay ledger ${file} is unreadable (${(error as Error).message})`);
  }
  const claims = new Map<string, ReplayClaim>();
  const lines = text.split('\n');
  let kept = 0;
  lines.forEach((line, i) => {
    if (line === '') return;
    let batch: { replay: string; ends: Record<string, string>; claims: [string, string][] };
    try {
      batch = JSON.parse(line);
      if (typeof batch.replay !== 'string' || typeof batch.ends !== 'object' || !Array.isArray(batch.claims)) throw new Error('not a batch of claims');
    } catch (error) {
      if (i === lines.length - 1) return; // cut short by a crash: its copies were never appended
      throw new Error(`the replay ledger ${file} is unreadable at line ${i + 1} (${(error as Error).message}): it says which originals were replayed, so replays wait until it is repaired`);
    }
    for (const [original, letter] of batch.claims) { claims.set(original, { replay: batch.replay, letter, ends: batch.ends }); kept++; }
  });
  // Every letter a claim guards (those before its ends) is gone: it guards nothing any more.
  const gone = (ends: Record<string, string>) => Object.entries(ends).every(([p, end]) => BigInt(firsts[p] ?? '0') >= BigInt(end));
  for (const [original, claim] of claims) if (claim.ends && gone(claim.ends)) claims.delete(original);
  if (kept !== claims.size) await writeFileAtomically(file, compact(claims));
  const append = async (line: string) => {
    await makeDirectories(path.dirname(file));
    const handle = await fsp.open(file, 'a');
    try {
      await handle.write(`${line}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
  };
  return ledger(claims, cap, append);
}

/** The claims as lines again, one per replay and ends they share. */
function compact(claims: Map<string, ReplayClaim>): string {
  const batches = new Map<Record<string, string>, { replay: string; ends: Record<string, string>; claims: [string, string][] }>();
  for (const [original, claim] of claims) {
    const ends = claim.ends!;
    const batch = batches.get(ends) ?? { replay: claim.replay, ends, claims: [] };
    batch.claims.push([original, claim.letter]);
    batches.set(ends, batch);
  }
  return [...batches.values()].map((b) => `${JSON.stringify(b)}\n`).join('');
}
