import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { crashGuard, crashMarksIn, turnTaking, type CrashGuard, type CrashMarks, type CrashPlan } from '../../services/platform/log/crash-guard';
import type { LogRecord } from '../../services/platform/log/event-log';
import { silentLogger } from '../../services/platform/logger/logger';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { MAX_VERSIONED_BYTES, type ObjectStore } from '../../services/platform/store/object-store';

/**
 * Crash marks in a real object store (the filesystem's, as `npm start` keeps them): what a damaged one reads as,
 * and the guard's compare-and-swaps between ownerships of one partition.
 */
let dir: string;
let store: ObjectStore;
beforeAll(async () => { dir = mkdtempSync(path.join(tmpdir(), 'crash-marks-')); store = await openFilesystemStore(dir); });
afterAll(async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); });

const mark = { from: '5', record: 'digest', to: '9', alone: false, writer: 'w', at: 1 };

test('a mark that is no mark (not JSON) reads as none, and is written over by a swap of its version', async () => {
  const marks = crashMarksIn(store);
  await store.put('stage-marks/g/t/0.json', Buffer.from('{torn'));
  const { mark: found, version } = await marks.readVersioned('g', 't', 0);
  expect(found).toBeNull();
  expect(await marks.swap('g', 't', 0, mark, version)).not.toBeNull();
  expect(await marks.read('g', 't', 0)).toEqual(mark);
});

test('an object too large to be a mark reads as none rather than failing every batch, and the next swap writes', async () => {
  const marks = crashMarksIn(store);
  await store.put('stage-marks/g/t/1.json', Buffer.alloc(MAX_VERSIONED_BYTES + 1, 0x20));
  expect(await marks.readVersioned('g', 't', 1)).toEqual({ mark: null, version: null });
  expect(await marks.swap('g', 't', 1, mark, null)).not.toBeNull();
  expect(await marks.read('g', 't', 1)).toEqual(mark);
});

const records = (from: number, count: number): LogRecord[] =>
  Array.from({ length: count }, (_, i) => ({ topic: 't', partition: 2, offset: String(from + i), key: null, value: Buffer.from(`r-${from + i}`), headers: {}, timestamp: 0 }));
/** A member's stage guard: its own thread of batches, as in a process of its own. */
const member = (marks: CrashMarks) => crashGuard(marks, 'tenures', silentLogger, 'decoder', turnTaking());
const plan = async (guard: CrashGuard, batch: LogRecord[], first: boolean): Promise<CrashPlan> => {
  const turn = await guard.begin(batch, first);
  await turn.done();
  return turn.plan;
};

describe('a member that owns a partition again while its earlier ownership still has a write to go out', () => {
  test('the earlier ownership\'s late `returned` does not land over the later one\'s mark: an end while it holds its batch is counted', async () => {
    const marks = crashMarksIn(store);
    await member(marks).begin(records(10, 3), true); // a life ends holding 10..12
    const w = member(marks);
    const frozen = await w.begin(records(10, 3), true); // 10 alone in hand; the member freezes past its session
    expect(frozen.plan).toBe('alone');
    // Another member takes the partition over, strikes 10, gets through 10..12 and commits them; then the partition
    // comes back to the first member, thawed and in the group again, while its handler of 10 is still out.
    const other = member(marks);
    for (const at of [10, 11, 12]) expect(await plan(other, records(at, 13 - at), at === 10)).toBe('alone');
    const again = await w.begin(records(13, 3), true); // its new ownership's batch of 13..15, marked
    expect(again.plan).toBe('batch');
    await frozen.done(); // the handler of 10 from its earlier ownership comes back
    expect(await marks.read('tenures', 't', 2)).toMatchObject({ from: '13', to: '15', alone: false });
    // The process ends holding 13..15: the next owner finds that batch's mark and narrows it down.
    expect(await plan(member(marks), records(13, 3), true)).toBe('alone');
  });

  test('the earlier ownership\'s late `returned` does not undo the later one\'s verdict', async () => {
    const marks = crashMarksIn(store);
    await member(marks).begin(records(20, 3), true); // a life ends holding 20..22
    const w = member(marks);
    const frozen = await w.begin(records(20, 3), true); // 20 alone in hand; the member freezes past its session
    await member(marks).begin(records(20, 3), true); // another member ends with 20 alone in hand: a strike
    expect(await marks.read('tenures', 't', 2)).toMatchObject({ from: '20', alone: true, strikes: 1 });
    // The partition comes back to the first member: 20 has ended a process alone in hand twice.
    expect(await plan(w, records(20, 3), true)).toBe('crashed');
    await frozen.done(); // its earlier ownership's handler of 20 comes back
    expect(await marks.read('tenures', 't', 2)).toMatchObject({ from: '20', alone: true, strikes: 2 });
    // The process ends before the dead letter commits: the next owner comes to the same verdict.
    expect(await plan(member(marks), records(20, 3), true)).toBe('crashed');
  });
});
