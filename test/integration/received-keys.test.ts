import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { receivedKeysReader } from '../../services/decoder/received-keys';
import type { KeyedAccept } from '../../services/decoder/idempotency-ledger';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import type { EventLog, LogRecord } from '../../services/platform/log/event-log';
import { IDEMPOTENCY_HEADER } from '../../services/platform/log/record-keys';
import { silentLogger } from '../../services/platform/logger/logger';

/**
 * The decoder's read-back of idempotency keys, on a real embedded log. A read-back that stops short (its patience
 * ran out) goes on from where it stopped when its batch is retried: started again from the beginning, one that
 * needs longer than its patience would never finish and would hold its partition for ever.
 */
let dataDir: string;
let log: EventLog;
const TOPIC = 'ingress.received.v1';
const RECORDS = 60;
beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), 'received-keys-'));
  log = await openEmbeddedLog({ dataDir });
  // Every third record unkeyed: it is read past, not taken.
  await log.append(Array.from({ length: RECORDS }, (_, i) => ({
    topic: TOPIC, key: 'wf', value: Buffer.from(JSON.stringify({ key: `k${i}`, requestId: `r${i}` })),
    headers: i % 3 === 2 ? {} as Record<string, string> : { [IDEMPOTENCY_HEADER]: '3600000' },
  })));
});
afterAll(async () => { await log?.close(); rmSync(dataDir, { recursive: true, force: true }); });

const acceptOf = (record: LogRecord): KeyedAccept => {
  const { key, requestId } = JSON.parse(record.value.toString());
  return { identity: `wf\n${key}`, requestId, receivedAt: record.timestamp, windowMs: 3_600_000 };
};
const keyedIds = Array.from({ length: RECORDS }, (_, i) => i).filter((i) => i % 3 !== 2).map((i) => `r${i}`);

/** The real log, except that each read ends, as one past its patience does, after `perRead` records. */
function shortReads(perRead: number) {
  const offsetsRead: string[] = [];
  const shortLog: Pick<EventLog, 'read' | 'offsetsForTime'> = {
    offsetsForTime: (topic, time) => log.offsetsForTime(topic, time),
    async *read(topic, options) {
      let given = 0;
      for await (const record of log.read(topic, options)) {
        if (given++ === perRead) return;
        offsetsRead.push(record.offset);
        yield record;
      }
    },
  };
  return { shortLog, offsetsRead };
}

test('a read-back that stops short goes on from where it stopped when retried, and reads each record once', async () => {
  const { shortLog, offsetsRead } = shortReads(7);
  const readBack = receivedKeysReader({ log: shortLog, topic: TOPIC, logger: silentLogger, acceptOf });
  let failures = 0;
  let accepts: KeyedAccept[] | null = null;
  while (accepts === null && failures < 50) {
    try {
      accepts = await readBack(0, { offset: 0n }, BigInt(RECORDS));
    } catch (error) {
      expect((error as Error).message).toMatch(/stopped at offset \d+, before 59 \(its retry goes on from there\)/);
      failures++;
    }
  }
  expect(failures).toBe(Math.ceil(RECORDS / 7) - 1);
  expect(accepts!.map((a) => a.requestId)).toEqual(keyedIds);
  expect(offsetsRead).toEqual(Array.from({ length: RECORDS }, (_, i) => String(i)));
});

test('a read-back of another range, or of another partition, starts afresh; the one it replaced is dropped', async () => {
  const { shortLog } = shortReads(7);
  const readBack = receivedKeysReader({ log: shortLog, topic: TOPIC, logger: silentLogger, acceptOf });
  await expect(readBack(0, { offset: 0n }, BigInt(RECORDS))).rejects.toThrow(/stopped at offset 6/);
  // Another end (a later record's read-back): nothing of the first is taken.
  await expect(readBack(0, { offset: 0n }, 5n)).resolves.toHaveLength(4);
  // The first again: from its beginning, since a read-back of another range came between.
  await expect(readBack(0, { offset: 0n }, BigInt(RECORDS))).rejects.toThrow(/stopped at offset 6,/);
  await expect(readBack(0, { offset: 0n }, BigInt(RECORDS))).rejects.toThrow(/stopped at offset 13,/);
});

test('a whole read-back in one go reads the keyed records of the range, and nothing from its end on', async () => {
  const readBack = receivedKeysReader({ log, topic: TOPIC, logger: silentLogger, acceptOf });
  expect((await readBack(0, { offset: 10n }, 20n)).map((a) => a.requestId)).toEqual(keyedIds.filter((id) => Number(id.slice(1)) >= 10 && Number(id.slice(1)) < 20));
  expect(await readBack(0, { offset: 20n }, 20n)).toEqual([]);
});

test('offsets missing just before the end (a transaction marker, on Kafka) do not leave a read-back short', async () => {
  const gapped: Pick<EventLog, 'read' | 'offsetsForTime'> = {
    offsetsForTime: (topic, time) => log.offsetsForTime(topic, time),
    async *read(topic, options) {
      for await (const record of log.read(topic, options)) if (record.offset !== '29') yield record;
    },
  };
  const readBack = receivedKeysReader({ log: gapped, topic: TOPIC, logger: silentLogger, acceptOf });
  expect((await readBack(0, { offset: 20n }, 30n)).map((a) => a.requestId)).toEqual(keyedIds.filter((id) => Number(id.slice(1)) >= 20 && Number(id.slice(1)) < 29));
});
