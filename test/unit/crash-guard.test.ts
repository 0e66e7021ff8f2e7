import { crashGuard, markStopping, recordDigest, turnTaking, type CrashGuard, type CrashMark, type CrashMarks, type CrashPlan, type TurnTaking } from '../../services/platform/log/crash-guard';
import type { LogRecord } from '../../services/platform/log/event-log';
import { silentLogger } from '../../services/platform/logger/logger';
import { memoryMarks } from '../support/memory-marks';

const batch = (from: number, count: number, partition = 0, log = 'a'): LogRecord[] =>
  Array.from({ length: count }, (_, i) => ({ topic: 't', partition, offset: String(from + i), key: null, value: Buffer.from(`${log}-${from + i}`), headers: {}, timestamp: 0 }));

/** A batch handled and come back. */
async function handled(guard: CrashGuard, records: LogRecord[], first: boolean): Promise<CrashPlan> {
  const turn = await guard.begin(records, first);
  await turn.done();
  return turn.plan;
}
/** A batch in hand when its process ends: its handler never comes back. */
async function endsHolding(guard: CrashGuard, records: LogRecord[], first: boolean): Promise<CrashPlan> {
  return (await guard.begin(records, first)).plan;
}
/** A stage's guard in a life of the process (each life a thread of its own, unless one is given). */
const life = (marks: CrashMarks, group = 'g', thread: TurnTaking = turnTaking()) => crashGuard(marks, group, silentLogger, 'decoder', thread);

test('steady batches write no mark; a first batch since owning the partition writes one', async () => {
  const marks = memoryMarks();
  const guard = life(marks);
  expect(await handled(guard, batch(10, 5), true)).toBe('batch');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', to: '14', alone: false });
  expect(await handled(guard, batch(15, 5), false)).toBe('batch');
  expect(await handled(guard, batch(20, 5), false)).toBe('batch');
  expect(marks.writes).toBe(1);
});

test('a life that ended on its first batch: the next handles that range alone, and the record two lives end on alone is dead-lettered', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 4), true); // life 1 ends holding 10..13
  const second = life(marks);
  expect(await handled(second, batch(10, 4), true)).toBe('alone');
  expect(await endsHolding(second, batch(11, 3), false)).toBe('alone'); // life 2 ends holding 11 alone: a strike
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '11', to: '13', alone: true });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('strikes');
  const third = life(marks);
  expect(await endsHolding(third, batch(11, 3), true)).toBe('alone'); // life 3 ends holding 11 alone again
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '11', alone: true, strikes: 1 });
  const fourth = life(marks);
  expect(await handled(fourth, batch(11, 3), true)).toBe('crashed');
  // Its dead letter did not commit: the same batch comes again, and is still the crashed record.
  expect(await handled(fourth, batch(11, 3), false)).toBe('crashed');
  expect(await handled(fourth, batch(12, 2), false)).toBe('alone');
  expect(await handled(fourth, batch(13, 1), false)).toBe('alone');
  expect(await handled(fourth, batch(14, 6), false)).toBe('batch');
});

test('one unrelated end while a record is alone in hand is a strike its next handling clears: nothing is dead-lettered', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 3), true); // a crash beside 10..12 (another record's, elsewhere)
  const second = life(marks);
  expect(await endsHolding(second, batch(10, 3), true)).toBe('alone'); // a kill -9 while 10 is alone in hand
  const third = life(marks);
  expect(await handled(third, batch(10, 3), true)).toBe('alone'); // 10 handled again, and back
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', returned: true });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('strikes');
  // Retried in the same life (it failed: a backend outage), it is handled with no strike either.
  const retry = await third.begin(batch(10, 3), false);
  expect(retry.plan).toBe('alone');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('strikes');
  await retry.done();
  // Back, its strike is gone: the next end while it is alone in hand (killed before its commit) is its first
  // strike again, not a conviction.
  expect(await endsHolding(life(marks), batch(10, 3), true)).toBe('alone');
  expect(await handled(life(marks), batch(10, 3), true)).toBe('alone');
});

test('a stop during a mark\'s first write is in that mark; a stop\'s rewrite never lands after the mark that follows it', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(30, 2), true);
  let finishFirst: () => void = () => undefined;
  const slow: CrashMarks = {
    read: marks.read,
    readVersioned: marks.readVersioned,
    async swap(group, topic, partition, mark, version) {
      if (marks.writes === 1) await new Promise<void>((resolve) => { finishFirst = resolve; });
      return marks.swap(group, topic, partition, mark, version);
    },
  };
  const thread = turnTaking();
  const guard = life(slow, 'g', thread);
  const turn = guard.begin(batch(30, 2), true); // its mark of 30 alone is being written
  await new Promise((resolve) => setImmediate(resolve));
  const stopping = markStopping(thread);
  finishFirst();
  await stopping;
  await (await turn).done(); // back: `returned` is written last
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '30', alone: true, returned: true });
  // Had the process ended before `returned`, the stop would have been in its mark.
  expect(marks.writes).toBe(4);
});

test('a stop asked for (SIGTERM) is no sign against what is in hand: a batch runs as usual next time, a record alone gets no strike', async () => {
  const marks = memoryMarks();
  const thread = turnTaking();
  const stopped = life(marks, 'g', thread);
  await endsHolding(stopped, batch(10, 3), true);
  await markStopping(thread); // the grace ran out while 10..12 were in hand
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: false, stopped: true });
  expect(await handled(life(marks), batch(10, 3), true)).toBe('batch');

  // Narrowing after a crash: stops while the same record is alone in hand, twice, are not strikes.
  await endsHolding(life(marks), batch(20, 3), true);
  for (let lives = 0; lives < 2; lives++) {
    const t = turnTaking();
    expect(await endsHolding(life(marks, 'g', t), batch(20, 3), true)).toBe('alone');
    await markStopping(t);
    expect(marks.held.get('g/t/0')).toMatchObject({ from: '20', alone: true, stopped: true });
  }
  // Marks written once the stop is under way say so too.
  const late = turnTaking();
  const lateLife = life(marks, 'g', late);
  await markStopping(late);
  expect(await endsHolding(lateLife, batch(20, 3), true)).toBe('alone');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '20', stopped: true });
  expect(await handled(life(marks), batch(20, 3), true)).toBe('alone');
});

test('the stages of one thread start together: a guard made once another stage\'s batch is in hand keeps it, so a stop still marks it', async () => {
  const marks = memoryMarks();
  const thread = turnTaking();
  const decoder = life(marks, 'g', thread);
  await endsHolding(decoder, batch(10, 3), true); // the decoder's first batch is in hand
  life(marks, 'g-dispatcher', thread); // then the dispatcher's guard is made (its start ended later)
  await markStopping(thread);
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', stopped: true });
});

test('a record handled alone whose handler came back (it failed in an outage) is not what a later end is blamed on', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(7, 2), true);
  // Each life handles 7 alone, which fails (the registry is down) and is retried, until SIGTERM stops the life.
  for (let lives = 0; lives < 3; lives++) expect(await handled(life(marks), batch(7, 2), true)).toBe('alone');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '7', alone: true, returned: true });
});

test('a partition owned anew in the middle of its own narrowing (a failed Kafka transaction) goes on narrowing', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 4), true); // life 1 ends holding 10..13
  const second = life(marks);
  expect(await handled(second, batch(10, 4), true)).toBe('alone');
  // Record 11's transaction failed: the partition is fetched again from 11, owned anew.
  expect(await handled(second, batch(11, 3), false)).toBe('alone');
  expect(await handled(second, batch(11, 3), true)).toBe('alone');
  expect(await handled(second, batch(12, 2), false)).toBe('alone');
  expect(await handled(second, batch(13, 1), false)).toBe('alone');
  expect(await handled(second, batch(14, 6), false)).toBe('batch');
});

test('its own mark (a batch given again after a failed commit), a mark at another offset, and another partition are not suspected', async () => {
  const marks = memoryMarks();
  const guard = life(marks);
  expect(await handled(guard, batch(10, 4), true)).toBe('batch');
  expect(await handled(guard, batch(10, 4), true)).toBe('batch');
  // Another life, whose committed offset moved past the mark: the previous life did not end on it.
  expect(await handled(life(marks), batch(14, 4), true)).toBe('batch');
  expect(await handled(life(marks), batch(14, 4, 1), true)).toBe('batch');
});

test('a mark left by another log (a new DATA_DIR or topic on a shared object store) names no record of this one', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(0, 3, 0, 'old'), true); // the old log's life ends holding 0..2
  // A new log's offset 0 holds another request: handled as usual, the mark replaced by one of this log.
  expect(await handled(life(marks), batch(0, 3, 0, 'new'), true)).toBe('batch');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '0', alone: false });
  // The old log's records are no longer what the mark names either.
  expect(await handled(life(marks), batch(0, 3, 0, 'old'), true)).toBe('batch');
});

test('while a stage of the thread narrows a crash down, the thread\'s batches are handled one at a time, none beside one in hand', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks, 'decoder'), batch(5, 2), true); // the decoder's life ended holding 5..6
  const thread = turnTaking();
  const decoder = life(marks, 'decoder', thread);
  const dispatcher = life(marks, 'dispatcher', thread);
  // A dispatcher batch already in hand when the decoder starts narrowing: the decoder's record waits for it.
  const inHand = await dispatcher.begin(batch(0, 3), true);
  expect(inHand.plan).toBe('batch');
  let aloneBegun = false;
  const alone = decoder.begin(batch(5, 2), true).then((turn) => { aloneBegun = true; return turn; });
  await new Promise((resolve) => setImmediate(resolve));
  expect(aloneBegun).toBe(false);
  await inHand.done();
  const turn = await alone;
  expect(turn.plan).toBe('alone');
  // The dispatcher's next batch waits while the decoder's record is alone in hand.
  let nextBegun = false;
  const next = dispatcher.begin(batch(3, 3), false).then((t) => { nextBegun = true; return t; });
  await new Promise((resolve) => setImmediate(resolve));
  expect(nextBegun).toBe(false);
  await turn.done();
  await (await next).done();
  expect(nextBegun).toBe(true);
  // Once the range is passed, batches run side by side again.
  expect(await handled(decoder, batch(6, 1), false)).toBe('alone');
  const a = await decoder.begin(batch(7, 2), false);
  const b = await dispatcher.begin(batch(6, 2), false);
  expect([a.plan, b.plan]).toEqual(['batch', 'batch']);
  await a.done();
  await b.done();
});

test('a former owner whose handler comes back after its partition moved writes nothing over the new owner\'s mark', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 3), true); // a life ends holding 10..12
  // The next owner handles 10 alone and freezes in its handler, past its session: the partition moves on.
  const former = life(marks);
  const frozen = await former.begin(batch(10, 3), true);
  expect(frozen.plan).toBe('alone');
  const next = life(marks);
  expect(await endsHolding(next, batch(10, 3), true)).toBe('alone'); // the new owner ends on 10 alone: a strike
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true, strikes: 1 });
  await frozen.done(); // the former owner thaws: its handler came back
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true, strikes: 1 });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('returned');
  // Its strike kept, the record's second end alone convicts it.
  expect(await handled(life(marks), batch(10, 3), true)).toBe('crashed');
});

test('a former owner\'s stop rewrites nothing over the new owner\'s mark', async () => {
  const marks = memoryMarks();
  const formerThread = turnTaking();
  const former = life(marks, 'g', formerThread);
  await endsHolding(former, batch(20, 3), true); // in hand when the member froze
  const next = life(marks);
  expect(await endsHolding(next, batch(20, 3), true)).toBe('alone'); // the new owner ends on 20 alone
  await markStopping(formerThread); // the former owner, thawed, is stopped
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '20', alone: true });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('stopped');
  expect(await endsHolding(life(marks), batch(20, 3), true)).toBe('alone');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '20', alone: true, strikes: 1 });
});

test('the former owner\'s `returned` landing between the new owner\'s read and its first write is written over', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 3), true);
  const former = life(marks);
  const frozen = await former.begin(batch(10, 3), true);
  // The new owner has read the former's mark; its first write waits until the former's `returned` landed.
  let firstWrite: () => void = () => undefined;
  const held = new Promise<void>((resolve) => { firstWrite = resolve; });
  const slowed: CrashMarks = { ...marks, async swap(...args) { await held; return marks.swap(...args); } };
  const taking = life(slowed).begin(batch(10, 3), true);
  await new Promise((resolve) => setImmediate(resolve));
  await frozen.done();
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', returned: true });
  firstWrite();
  expect((await taking).plan).toBe('alone');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true, strikes: 1 });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('returned');
  // The former owner's later writes (it handles the next record alone before it learns it was fenced) are left out.
  await handled(former, batch(11, 2), false);
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true, strikes: 1 });
});

/** The marks, but the answer to the next swap after loseNext() is lost: the write lands and the call throws. */
function answerLost(marks: CrashMarks): CrashMarks & { loseNext(): void } {
  let lose = false;
  return {
    ...marks,
    loseNext() { lose = true; },
    async swap(...args) {
      const version = await marks.swap(...args);
      if (lose) { lose = false; throw new Error('no answer within 30000 ms'); }
      return version;
    },
  };
}

test('a write that landed but whose answer was lost is its own: the next write goes over it, not taken for another owner\'s', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 3), true);
  const lossy = answerLost(marks);
  lossy.loseNext();
  const guard = life(lossy);
  await expect(guard.begin(batch(10, 3), true)).rejects.toThrow('no answer'); // its mark of 10 alone landed
  const retried = await guard.begin(batch(10, 3), false); // the log hands the batch over again
  expect(retried.plan).toBe('alone');
  await retried.done();
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true, returned: true });
});

test('a verdict is the new owner\'s mark: the former owner\'s late `returned` does not undo it for an owner after it', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 3), true);
  await endsHolding(life(marks), batch(10, 3), true); // 10 alone in hand at an end: a strike
  // The next owner handles 10 alone and freezes in its handler; the partition moves on.
  const frozen = await life(marks).begin(batch(10, 3), true);
  expect(frozen.plan).toBe('alone');
  const next = life(marks);
  expect(await endsHolding(next, batch(10, 3), true)).toBe('crashed'); // ends before its dead letter commits
  await frozen.done();
  expect(marks.held.get('g/t/0')).not.toHaveProperty('returned');
  // Its own verdict, found again after a failed commit (which hands the partition over as if new), is still one.
  expect(await handled(next, batch(10, 3), true)).toBe('crashed');
  expect(await handled(life(marks), batch(10, 3), true)).toBe('crashed');
});

test('an earlier ownership of this member writes nothing over a later one whose first write landed with its answer lost', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 3), true);
  const lossy = answerLost(marks);
  const member = life(lossy);
  const frozen = await member.begin(batch(10, 3), true); // 10 alone in hand; the member freezes past its session
  const other = life(marks);
  for (const at of [10, 11, 12]) expect(await handled(other, batch(at, 13 - at), at === 10)).toBe('alone');
  // The partition is this member's again: its new ownership's mark of 13..15 lands, but the answer is lost.
  lossy.loseNext();
  await expect(member.begin(batch(13, 3), true)).rejects.toThrow('no answer');
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '13', alone: false, tenure: 2 });
  await frozen.done(); // told apart by the mark's tenure: the writer alone is this member's either way
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '13', alone: false, tenure: 2 });
});

test('a mark of a version before tenures (none in it) is read, and its writer\'s late write is written over as a predecessor\'s', async () => {
  const marks = memoryMarks();
  // The previous owner, of the earlier version, wrote 10 alone and ended, or froze: its mark has no tenure.
  const old: CrashMark = { from: '10', record: recordDigest(batch(10, 3)[0]), to: '12', alone: true, writer: 'before-upgrade', at: 1 };
  await marks.swap('g', 't', 0, old, null);
  // Its handler comes back late: its `returned`, no tenure either, lands after the new owner read the mark.
  let late = true;
  const racing: CrashMarks = {
    ...marks,
    async swap(...args) {
      if (late) {
        late = false;
        await marks.swap('g', 't', 0, { ...old, returned: true }, (await marks.readVersioned('g', 't', 0)).version);
      }
      return marks.swap(...args);
    },
  };
  expect(await endsHolding(life(racing), batch(10, 3), true)).toBe('alone'); // a strike: it was alone, not back
  expect(marks.held.get('g/t/0')).toMatchObject({ from: '10', alone: true, strikes: 1, tenure: 1 });
  expect(marks.held.get('g/t/0')).not.toHaveProperty('returned');
});

test('a partition owned anew in the middle of its own narrowing whose mark cannot be read at first goes on narrowing once it can', async () => {
  const marks = memoryMarks();
  await endsHolding(life(marks), batch(10, 4), true); // life 1 ends holding 10..13
  let down = false;
  const flaky: CrashMarks = {
    ...marks,
    async readVersioned(...args) {
      if (down) { down = false; throw new Error('object store unavailable'); }
      return marks.readVersioned(...args);
    },
  };
  const second = life(flaky);
  expect(await handled(second, batch(10, 4), true)).toBe('alone');
  // Record 11's transaction failed: the partition is owned anew, and the store does not answer its first read.
  down = true;
  await expect(second.begin(batch(11, 3), true)).rejects.toThrow('unavailable');
  expect(await handled(second, batch(11, 3), true)).toBe('alone');
  expect(await handled(second, batch(12, 2), false)).toBe('alone');
});
