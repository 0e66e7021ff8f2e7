import { dueGate, NotDue, Stopping } from '../../services/mdn/due-gate';
import type { LogRecord } from '../../services/platform/log/event-log';

/** The mdn stage's wait for a record's due time (services/mdn/due-gate.ts), on a clock the test moves. */
const record = (offset: string): LogRecord => ({ topic: 't', partition: 0, offset, key: null, value: Buffer.alloc(0), headers: {}, timestamp: 0 });

test('a due record passes at once; one not due is handed back once, then waited for; stop ends the wait', async () => {
  let now = 1_000;
  const gate = dueGate(() => now);
  await expect(gate.wait(record('1'), 1_000)).resolves.toBeUndefined();
  await expect(gate.wait(record('2'), 1_050)).rejects.toBeInstanceOf(NotDue);
  // The second time the record comes back, the gate waits (50 ms on the real timer) and lets it through.
  await expect(gate.wait(record('2'), 1_050)).resolves.toBeUndefined();
  // A far due time: handed back, then waited for until stop().
  now = 2_000;
  await expect(gate.wait(record('3'), now + 3_600_000)).rejects.toBeInstanceOf(NotDue);
  const waiting = gate.wait(record('3'), now + 3_600_000);
  gate.stop();
  await expect(waiting).rejects.toBeInstanceOf(Stopping);
  await expect(gate.wait(record('4'), 0)).rejects.toBeInstanceOf(Stopping);
});
