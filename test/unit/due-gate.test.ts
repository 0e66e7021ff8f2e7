import { dueGate, NotDue, Stopping } from '../../services/mdn/due-gate';
import type { LogRecord } from '../../services/platform/log/event-log';

/** The mdn stage's wait for a record's due time (services/mdn/due-gate.ts), on a clock the test moves. */
const record = (offset: string): LogRecord => ({ topic: 't', partition: 0, offset, key: null, value: Buffer.alloc(0), headers: {}, timestamp: 0 });

test('a due record passes at once; one not due is handed back once, then waited for, a bounded sleep at a time; stop ends the wait', async () => {
  let now = 1_000;
  const gate = dueGate(() => now, 30);
  await expect(gate.wait(record('1'), 1_000)).resolves.toBeUndefined();
  await expect(gate.wait(record('2'), 1_020)).rejects.toBeInstanceOf(NotDue);
  // The second time the record comes back, the gate sleeps (20 ms on the real timer, the clock moving meanwhile) and lets it through.
  setTimeout(() => { now = 1_020; }, 5);
  await expect(gate.wait(record('2'), 1_020)).resolves.toBeUndefined();
  // A far due time: handed back, then slept on for at most 30 ms and handed back again, never held for an hour.
  now = 2_000;
  await expect(gate.wait(record('3'), now + 3_600_000)).rejects.toBeInstanceOf(NotDue);
  await expect(gate.wait(record('3'), now + 3_600_000)).rejects.toBeInstanceOf(NotDue);
  // stop() ends a sleep in progress.
  const waiting = gate.wait(record('3'), now + 3_600_000);
  gate.stop();
  await expect(waiting).rejects.toBeInstanceOf(Stopping);
  await expect(gate.wait(record('4'), 0)).rejects.toBeInstanceOf(Stopping);
});
