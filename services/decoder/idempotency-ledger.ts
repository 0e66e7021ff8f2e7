/**
 * Which idempotency keys the decoder has seen, per partition of the received topic, so that a request repeating
 * the key of an earlier one within its node's window starts nothing (DESIGN.md §5 `idempotencyKey`).
 *
 * Why it is exact, with no store of its own: every request repeating a key lands on the same partition
 * (record-keys.ts), and the state for a record at offset `o` is a function of the partition's records before
 * `o` alone, so it can always be recovered from the log. The ledger knows which offsets its state covers,
 * [from, next). A record at `next` extends it. A record beyond `next` (another member handled the records in
 * between, before a rebalance gave the partition back) first reads the gap back. A record before `next` (a
 * transaction that did not commit, redelivered) is answered from the decisions remembered, else the state is
 * read back from the log again. A recovered state reaches back `lookbackMs` (the longest window a node may use).
 *
 * A duplicate is a request whose key was seen in an earlier record within the window of the *latest* earlier
 * one: a sender that keeps retrying keeps being absorbed. Replays are records like any other; a replay of the
 * request that was executed is not its own duplicate (same requestId).
 */
export interface KeyedAccept {
  /** Workflow and key (record-keys.ts idempotencyIdentity). */
  identity: string;
  requestId: string;
  receivedAt: number;
  /** The node's window when the receiver accepted the request (it travels with the record, so replays decide alike). */
  windowMs: number;
}

export interface LedgerDeps {
  /**
   * The keyed accepts among the partition's records in [from, to), in offset order; `from` may be a time (the
   * first record at or after it).
   */
  readBack(partition: number, from: { offset: bigint } | { time: number }, to: bigint): Promise<KeyedAccept[]>;
  /** How far back a recovered state reaches: at least the longest window a node may ask for. */
  lookbackMs: number;
}

export interface IdempotencyLedger {
  /**
   * Take the record at `offset` of `partition` (every record that decodes, keyed or not, so the ledger knows
   * what it has covered), and tell what the partition held of its key before it, for `repeats()`. Every keyed
   * record counts, whatever becomes of it, so a recovered state is the same as the
   * one it replaces.
   */
  observe(partition: number, offset: string, accept: KeyedAccept | null): Promise<Earlier | null>;
  /**
   * Do now, for the record at `offset`, the state work `observe` would do before it takes the record: an
   * unkeyed record (`receivedAt` null) is taken as observe takes it; for a keyed one, whatever the state lacks
   * before it is read back here, so that its observe reads nothing. The decoder calls it outside the crash guard
   * (a record in hand for the whole of a read-back would be convicted by three process deaths during read-backs). A keyed
   * record's `receivedAt` is asked for only when a read-back is due; answering null (the record does not decode:
   * observe never sees it) leaves the state as it was. Resolves false then, true when the record was settled.
   */
  prepare(partition: number, offset: string, receivedAt: (() => number | null) | null): Promise<boolean>;
  /** Keys held now, over all partitions (for the docs' memory figures and tests). */
  size(): number;
}

/** Receivers' clocks differ a little; a recovered state reaches this much further back. */
const CLOCK_SLACK_MS = 5 * 60_000;
/** Decisions remembered per partition, for records redelivered after a transaction that did not commit. */
const REMEMBERED_DECISIONS = 4096;

/** What the partition held of a key: its first request (of the current run) and when it was last seen. */
export interface Earlier { first: string; last: number }

/** The request `accept` repeats within its window, or null: what the decoder records as `duplicateOf`. */
export function repeats(earlier: Earlier | null, accept: KeyedAccept): string | null {
  return earlier !== null && earlier.first !== accept.requestId && accept.receivedAt - earlier.last <= accept.windowMs ? earlier.first : null;
}

interface PartitionState {
  /** The state covers the records before `next` (as far back as the lookback). */
  next: bigint;
  /** Oldest `last` first (an entry is moved to the end when seen again), so expiry looks at the front only. */
  keys: Map<string, Earlier>;
  /** What recent keyed records found, by offset. */
  decisions: Map<bigint, Earlier | null>;
  /** When (this process's clock) the state last took a record. */
  seenAt: number;
}

export function idempotencyLedger(deps: LedgerDeps, now: () => number = Date.now): IdempotencyLedger {
  const partitions = new Map<number, PartitionState>();
  let sweptAt = now();

  /**
   * States of partitions this process has not seen a record of for longer than the lookback are dropped: the
   * ledger is not told of a rebalance that took a partition away, and such a state would only be read back again
   * (from time, which costs no more) when a keyed record of the partition comes. Once a minute at most.
   */
  function sweep(at: number): void {
    if (at - sweptAt < 60_000) return;
    sweptAt = at;
    for (const [partition, state] of partitions) if (stale(state, at)) partitions.delete(partition);
  }
  const stale = (state: PartitionState, at: number) => at - state.seenAt > deps.lookbackMs + CLOCK_SLACK_MS;

  function take(state: PartitionState, accept: KeyedAccept): void {
    const seen = state.keys.get(accept.identity);
    state.keys.delete(accept.identity);
    // A run of one key ends when nothing repeated it for longer than the window: the next request starts a new one.
    const continues = seen !== undefined && accept.receivedAt - seen.last <= accept.windowMs;
    state.keys.set(accept.identity, continues ? { first: seen.first, last: Math.max(seen.last, accept.receivedAt) } : { first: accept.requestId, last: accept.receivedAt });
  }

  function expire(state: PartitionState, now: number): void {
    const cutoff = now - deps.lookbackMs - CLOCK_SLACK_MS;
    for (const [identity, seen] of state.keys) {
      if (seen.last >= cutoff) break;
      state.keys.delete(identity);
    }
  }

  async function recover(partition: number, upTo: bigint, at: number): Promise<PartitionState> {
    const state: PartitionState = { next: upTo, keys: new Map(), decisions: new Map(), seenAt: now() };
    for (const accept of await deps.readBack(partition, { time: at - deps.lookbackMs - CLOCK_SLACK_MS }, upTo)) take(state, accept);
    return state;
  }

  /**
   * What a record at `offset` needs before it is taken, shared by observe and prepare: the state made to cover
   * the partition's records before it (read back where it lacks them), or the decision remembered for a keyed
   * record redelivered (null for an unkeyed one, which this takes). Null when `receivedAt` answers null.
   */
  async function settle(partition: number, offset: bigint, receivedAt: (() => number | null) | null, at: number): Promise<PartitionState | { decided: Earlier | null } | null> {
    sweep(at);
    let state = partitions.get(partition);
    // Not fed for longer than the lookback (another member had the partition meanwhile): reading its gap back
    // could mean days of records, where recovering from time reads the lookback at most.
    if (state && stale(state, at)) {
      partitions.delete(partition);
      state = undefined;
    }
    if (state) state.seenAt = at;
    if (state && offset < state.next) {
      const decided = state.decisions.get(offset);
      if (decided !== undefined || receivedAt === null) return { decided: decided ?? null };
    }
    if (receivedAt === null) {
      // A state with a gap is dropped, and recovered when a keyed record needs it: unkeyed traffic reads nothing.
      if (state && offset === state.next) state.next++;
      else if (state) partitions.delete(partition);
      return { decided: null };
    }
    if (state && offset === state.next) return state;
    // A read-back is due: asked only now, so that a batch in the steady state decodes nothing for it.
    const time = receivedAt();
    if (time === null) return null;
    if (state && offset > state.next) {
      for (const missed of await deps.readBack(partition, { offset: state.next }, offset)) take(state, missed);
      state.next = offset;
      return state;
    }
    // No state, or a redelivered record whose decision is no longer remembered: recovered from the log.
    partitions.delete(partition);
    const recovered = await recover(partition, offset, time);
    partitions.set(partition, recovered);
    return recovered;
  }

  return {
    async observe(partition, offsetText, accept) {
      const offset = BigInt(offsetText);
      const settled = await settle(partition, offset, accept && (() => accept.receivedAt), now());
      if (settled === null || 'decided' in settled) return settled?.decided ?? null;
      const state = settled;
      const keyed = accept!; // settle answers a state for a keyed record only
      const seen = state.keys.get(keyed.identity);
      const earlier = seen === undefined ? null : { ...seen };
      take(state, keyed);
      state.next = offset + 1n;
      state.decisions.set(offset, earlier);
      if (state.decisions.size > REMEMBERED_DECISIONS) state.decisions.delete(state.decisions.keys().next().value!);
      expire(state, keyed.receivedAt);
      return earlier;
    },
    async prepare(partition, offsetText, receivedAt) {
      return (await settle(partition, BigInt(offsetText), receivedAt, now())) !== null;
    },
    size: () => [...partitions.values()].reduce((n, s) => n + s.keys.size, 0),
  };
}
