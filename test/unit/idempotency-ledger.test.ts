import { idempotencyLedger, repeats, type KeyedAccept } from '../../services/decoder/idempotency-ledger';

/**
 * The ledger against a partition held in an array: what it decides must be what a ledger that saw every record
 * from the start would decide, however it meets the partition (from the start, after a gap, redelivered, fresh).
 */
const HOUR = 3_600_000;
type Slot = KeyedAccept | null;

function partitionOf(slots: Slot[]) {
  const reads: string[] = [];
  const readBack = async (_p: number, from: { offset: bigint } | { time: number }, to: bigint) => {
    const start = 'offset' in from ? Number(from.offset) : Math.max(0, slots.findIndex((s) => s !== null && s.receivedAt >= from.time));
    reads.push(`${'offset' in from ? 'gap' : 'time'} ${start}-${to}`);
    return slots.slice(start, Number(to)).filter((s): s is KeyedAccept => s !== null);
  };
  return { readBack, reads };
}

const accept = (key: string, requestId: string, hoursIn: number, windowHours = 24): KeyedAccept => ({ identity: `wf\n${key}`, requestId, receivedAt: 1_000 * HOUR + hoursIn * HOUR, windowMs: windowHours * HOUR });

/** Decisions of a ledger fed every offset in order, the reference. */
async function inOrder(slots: Slot[]) {
  const { readBack } = partitionOf(slots);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
  const out: (string | null)[] = [];
  for (const [i, s] of slots.entries()) {
    const earlier = await ledger.observe(0, String(i), s);
    out.push(s ? repeats(earlier, s) : null);
  }
  return out;
}

const slots: Slot[] = [
  accept('a', 'r0', 0), null, accept('b', 'r2', 1), accept('a', 'r3', 2), null,
  accept('a', 'r5', 30), // 28 h after the last `a`: a new run
  accept('a', 'r6', 31), accept('b', 'r7', 40), accept('a', 'r0', 41), // r0 replayed: inside r5's run, so absorbed
  accept('c', 'r9', 42, 1), accept('c', 'r10', 44, 1), // a node with a 1-hour window
  accept('d', 'r11', 45), accept('d', 'r11', 45.5), // r11 redelivered as a new record (a replay): not its own duplicate
];

test('a repeat inside the window is a duplicate of the first request of its run; outside it, a new first', async () => {
  expect(await inOrder(slots)).toEqual([null, null, null, 'r0', null, null, 'r5', null, 'r5', null, null, null, null]);
});

test('the window slides with the latest repeat: a sender that keeps retrying stays absorbed', async () => {
  const retrying = [accept('k', 'x0', 0), accept('k', 'x1', 20), accept('k', 'x2', 40), accept('k', 'x3', 60)];
  expect(await inOrder(retrying)).toEqual([null, 'x0', 'x0', 'x0']);
});

test('a fresh ledger meeting the partition midway reads it back and decides the same', async () => {
  const reference = await inOrder(slots);
  for (let startAt = 1; startAt < slots.length; startAt++) {
    const { readBack, reads } = partitionOf(slots);
    const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
    for (let i = startAt; i < slots.length; i++) {
      const s = slots[i];
      const earlier = await ledger.observe(0, String(i), s);
      expect([i, s ? repeats(earlier, s) : null]).toEqual([i, reference[i]]);
    }
    expect(reads[0]).toMatch(/^time /); // recovered from the log, by time
  }
});

test('records another member handled (a gap) are read back; unkeyed traffic alone reads nothing', async () => {
  const reference = await inOrder(slots);
  const { readBack, reads } = partitionOf(slots);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
  const seenAt = async (i: number) => { const s = slots[i]; const e = await ledger.observe(0, String(i), s); return s ? repeats(e, s) : null; };
  expect(await seenAt(0)).toBe(reference[0]);
  expect(await seenAt(2)).toBe(reference[2]); // 1 was handled elsewhere
  expect(await seenAt(6)).toBe(reference[6]); // 3-5 too
  expect(await seenAt(8)).toBe(reference[8]);
  expect(reads).toEqual(['time 0-0', 'gap 1-2', 'gap 3-6', 'gap 7-8']);

  const quiet = partitionOf([null, null, null]);
  const other = idempotencyLedger({ readBack: quiet.readBack, lookbackMs: HOUR });
  for (let i = 0; i < 3; i++) expect(await other.observe(0, String(i), null)).toBeNull();
  expect(quiet.reads).toEqual([]);
});

test('a redelivered record (a transaction that did not commit) gets the same answer, remembered or read back', async () => {
  const reference = await inOrder(slots);
  const { readBack, reads } = partitionOf(slots);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
  const decide = async (i: number) => { const s = slots[i]; return s ? repeats(await ledger.observe(0, String(i), s), s) : (await ledger.observe(0, String(i), s), null); };
  for (let i = 0; i < slots.length; i++) await decide(i);
  const before = reads.length;
  for (let i = 3; i < slots.length; i++) expect(await decide(i)).toBe(reference[i]);
  expect(reads.length).toBe(before); // remembered, nothing read
});

test('keys older than the lookback are forgotten', async () => {
  const { readBack } = partitionOf([]);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 2 * HOUR });
  await ledger.observe(0, '0', accept('old', 'o', 0, 1));
  await ledger.observe(0, '1', accept('new', 'n', 10, 1));
  expect(ledger.size()).toBe(1);
});

test('a partition this process has not fed for longer than the lookback is recovered from time, not from where it left, and its state is dropped meanwhile', async () => {
  // Record 1 six days after record 0: the partition was another member's for those days (a rebalance the ledger
  // is not told of). Reading the gap back from offset 1 would read those days; from time reads the lookback.
  const days = [accept('a', 'r0', 0), ...Array.from({ length: 50 }, () => null), accept('a', 'r51', 6 * 24)];
  const reference = await inOrder(days);
  const { readBack, reads } = partitionOf(days);
  let clock = 0;
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR }, () => clock);
  await ledger.observe(0, '0', days[0]);
  await ledger.observe(1, '0', accept('z', 'z0', 0)); // another partition, never seen again
  expect(ledger.size()).toBe(2);
  clock += 6 * 24 * HOUR;
  const s = days[51]!;
  expect(repeats(await ledger.observe(0, '51', s), s)).toBe(reference[51]);
  expect(reads).toEqual(['time 0-0', 'time 0-0', `time 51-51`]);
  // Partition 1's state went with the sweep: only partition 0's key is held.
  expect(ledger.size()).toBe(1);
});

/**
 * The decoder's outer batch handler prepares a batch before its crash-guarded handling (decoder.ts
 * prepareLedger): each partition's records up to its first keyed one, so that observe then reads nothing.
 */
async function prepared(ledger: ReturnType<typeof idempotencyLedger>, batch: [number, Slot][], asked: number[] = []) {
  for (const [i, s] of batch) {
    if (s === null) { await ledger.prepare(0, String(i), null); continue; }
    await ledger.prepare(0, String(i), () => { asked.push(i); return s.receivedAt; });
    return;
  }
}

/** What the decoder records for the record at `i` (observe takes every record, keyed or not). */
async function decided(ledger: ReturnType<typeof idempotencyLedger>, i: number, s: Slot) {
  const earlier = await ledger.observe(0, String(i), s);
  return s ? repeats(earlier, s) : null;
}

test('prepare does the read-back a batch\'s first keyed record needs, after a start or a gap; observe then reads nothing and decides the same', async () => {
  const reference = await inOrder(slots);
  const at = (from: number, to = slots.length) => slots.slice(from, to).map((s, k): [number, Slot] => [from + k, s]);
  for (let startAt = 1; startAt < slots.length; startAt++) {
    const { readBack, reads } = partitionOf(slots);
    const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
    await prepared(ledger, at(startAt));
    const readInPrepare = [...reads];
    expect(readInPrepare).toEqual([expect.stringMatching(/^time /)]); // a start: recovered from the log, by time
    for (const [i, s] of at(startAt)) expect([i, await decided(ledger, i, s)]).toEqual([i, reference[i]]);
    expect(reads).toEqual(readInPrepare);
  }

  // Records 3-5 were handled by another member: the gap is read back in prepare.
  const { readBack, reads } = partitionOf(slots);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
  for (const [i, s] of at(0, 3)) await ledger.observe(0, String(i), s);
  expect(reads).toEqual(['time 0-0']);
  await prepared(ledger, at(6));
  expect(reads).toEqual(['time 0-0', 'gap 3-6']);
  for (const [i, s] of at(6)) expect([i, await decided(ledger, i, s)]).toEqual([i, reference[i]]);
  expect(reads).toEqual(['time 0-0', 'gap 3-6']);
});

test('an unkeyed batch, a steady keyed batch and a redelivered one read nothing in prepare, and ask no record for its receivedAt', async () => {
  const { readBack, reads } = partitionOf(slots);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
  const asked: number[] = [];
  const quiet = partitionOf([null, null, null]);
  const unkeyed = idempotencyLedger({ readBack: quiet.readBack, lookbackMs: HOUR });
  await prepared(unkeyed, [[0, null], [1, null], [2, null]], asked);
  for (let i = 0; i < 3; i++) expect(await unkeyed.observe(0, String(i), null)).toBeNull();
  expect(quiet.reads).toEqual([]);

  for (const [i, s] of slots.slice(0, 4).entries()) await ledger.observe(0, String(i), s);
  const readBefore = [...reads];
  await prepared(ledger, slots.slice(4).map((s, k) => [4 + k, s]), asked); // 4 unkeyed, 5 keyed: the steady state
  await prepared(ledger, slots.slice(2).map((s, k) => [2 + k, s]), asked); // 2 again: its decision is remembered
  expect(asked).toEqual([]);
  expect(reads).toEqual(readBefore);
});

test('a keyed record that does not decode (prepare is given no receivedAt) leaves the state as it was, as observe never sees it', async () => {
  const { readBack, reads } = partitionOf(slots);
  const ledger = idempotencyLedger({ readBack, lookbackMs: 72 * HOUR });
  expect(await ledger.prepare(0, '3', () => null)).toBe(false);
  expect([reads, ledger.size()]).toEqual([[], 0]);
  expect(await ledger.prepare(0, '3', () => slots[3]!.receivedAt)).toBe(true);
  expect(reads).toEqual(['time 0-3']);
  // After a record that did not decode (3, never observed), the next keyed one finds a gap, as observe would.
  expect(await ledger.prepare(0, '5', () => slots[5]!.receivedAt)).toBe(true);
  expect(reads).toEqual(['time 0-3', 'gap 3-5']);
});
