import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { isBackendOutage, OUTAGE_RETRY_MS, StageInputError, withDeadLetteringBatch } from '../../services/platform/log/dead-lettering';
import { EventLogError } from '../../services/platform/log/event-log';
import { ObjectStoreError } from '../../services/platform/store/object-store';
import type { LogRecord, OutRecord } from '../../services/platform/log/event-log';
import { packLogRecords, packOutputs, unpackLogRecords, unpackOutputs } from '../../services/platform/log/remote/record-transfer';
import { checkedBatchResult, eachRecord } from '../../services/platform/log/stage-batch';
import { silentLogger } from '../../services/platform/logger/logger';
import { RegistryError, withSamples, type Sample } from '../../services/platform/registry/registry';

const record = (offset: number, value: string): LogRecord => ({ topic: 'in', partition: 0, offset: String(offset), key: 'k', value: Buffer.from(value), headers: { h: value }, timestamp: 1 });
const out = (value: string, bytes = value.length): OutRecord => ({ topic: 'out', key: 'k', value: Buffer.alloc(bytes, value) });

describe('eachRecord: the per-record handler as a batch', () => {
  test('stops at the first failure, with the outputs of the records before it', async () => {
    const result = await eachRecord([record(0, 'a'), record(1, 'bad'), record(2, 'c')], { maxOutputBytes: 1e9, deadline: Infinity }, async (r) => {
      if (r.value.toString() === 'bad') throw new Error('no');
      return [out(r.value.toString())];
    });
    expect(result.outputs.map((o) => o[0].value.toString())).toEqual(['a']);
    expect(result.failure?.index).toBe(1);
  });

  test('stops before a record once the outputs reach the budget', async () => {
    const result = await eachRecord([record(0, 'a'), record(1, 'b'), record(2, 'c')], { maxOutputBytes: 10, deadline: Infinity }, async (r) => [out(r.value.toString(), 6)]);
    expect(result.outputs).toHaveLength(2);
    expect(result.failure).toBeUndefined();
  });

  test('stops before a record once the deadline has passed, after handling at least one', async () => {
    const seen: string[] = [];
    const slow = async (r: LogRecord) => {
      seen.push(r.value.toString());
      await new Promise((resolve) => setTimeout(resolve, 30));
      return [out(r.value.toString())];
    };
    const past = await eachRecord([record(0, 'a'), record(1, 'b')], { maxOutputBytes: 1e9, deadline: Date.now() - 1 }, slow);
    expect(past.outputs).toHaveLength(1);
    const result = await eachRecord([record(0, 'a'), record(1, 'b'), record(2, 'c'), record(3, 'd')], { maxOutputBytes: 1e9, deadline: Date.now() + 45 }, slow);
    // Each record takes at least 30 ms, so the deadline has passed by the third record, whatever the machine.
    expect(result.outputs.length).toBeGreaterThanOrEqual(1);
    expect(result.outputs.length).toBeLessThanOrEqual(2);
    expect(result.failure).toBeUndefined();
    expect(seen).toHaveLength(1 + result.outputs.length);
  });

  test('a result that handled nothing and names no failure, or fails elsewhere than after its outputs, is refused', () => {
    expect(() => checkedBatchResult({ outputs: [] }, 2)).toThrow(/handled no record/);
    expect(() => checkedBatchResult({ outputs: [[]], failure: { index: 0, error: new Error('x') } }, 2)).toThrow(/failed at record 0/);
    expect(() => checkedBatchResult({ outputs: [[], [], []] }, 2)).toThrow(/outputs for 3/);
  });
});

describe('withDeadLetteringBatch', () => {
  const codec = defaultAvroCodec();
  const options = { stage: 'test', topic: 'dead', codec, logger: silentLogger, recordKey: 'workflow' as const, maxAttempts: 2 };
  const inner = (failing: (value: string) => Error | null) => async (records: LogRecord[]) => {
    const outputs: OutRecord[][] = [];
    for (const [index, r] of records.entries()) {
      const error = failing(r.value.toString());
      if (error) return { outputs, failure: { index, error } };
      outputs.push([out(`ok-${r.value.toString()}`)]);
    }
    return { outputs };
  };

  test('a permanent failure becomes that record\'s dead letter and the rest of the batch goes on', async () => {
    const handle = withDeadLetteringBatch(inner((v) => (v === 'poison' ? new StageInputError('bad', 'bad input') : null)), options);
    const result = await handle([record(0, 'a'), record(1, 'poison'), record(2, 'c')], { maxOutputBytes: 1e9, deadline: Infinity });
    expect(result.failure).toBeUndefined();
    expect(result.outputs.map((o) => o[0].topic)).toEqual(['out', 'dead', 'out']);
    expect(codec.decode('DeadLetter', result.outputs[1][0].value).source.offset).toBe('1');
  });

  test('after a dead letter, the rest of the batch is not handed on once the deadline has passed', async () => {
    const handed: number[] = [];
    const handle = withDeadLetteringBatch(async (records: LogRecord[]) => {
      handed.push(records.length);
      await new Promise((resolve) => setTimeout(resolve, 40));
      return inner((v) => (v === 'poison' ? new StageInputError('bad', 'bad input') : null))(records);
    }, options);
    const result = await handle([record(0, 'poison'), record(1, 'b'), record(2, 'c')], { maxOutputBytes: 1e9, deadline: Date.now() + 20 });
    expect(handed).toEqual([3]);
    expect(result.outputs.map((o) => o[0].topic)).toEqual(['dead']);
    expect(result.failure).toBeUndefined();
  });

  test('a transient failure is the batch\'s failure at that record until its attempts run out', async () => {
    const handle = withDeadLetteringBatch(inner((v) => (v === 'flaky' ? new Error('later') : null)), options);
    const records = [record(0, 'a'), record(1, 'flaky'), record(2, 'c')];
    const first = await handle(records, { maxOutputBytes: 1e9, deadline: Infinity });
    expect(first.outputs).toHaveLength(1);
    expect(first.failure?.index).toBe(1);
    const second = await handle(records.slice(1), { maxOutputBytes: 1e9, deadline: Infinity });
    expect(second.failure).toBeUndefined();
    expect(second.outputs.map((o) => o[0].topic)).toEqual(['dead', 'out']);
  });

  test('a dead letter is logged and counted once its commit succeeded, once, however often a failed commit hands it over again; and at once again, not after its attempts once more', async () => {
    const lines: Record<string, unknown>[] = [];
    const counted: string[] = [];
    const handle = withDeadLetteringBatch(inner((v) => (v === 'flaky' ? new Error('later') : null)), {
      ...options,
      logger: { ...silentLogger, warn: (message: string, fields?: Record<string, unknown>) => { if (message === 'record dead-lettered') lines.push(fields ?? {}); } },
      metrics: { stageRecord: (_stage: string, outcome: string) => { counted.push(outcome); } },
    });
    const records = [record(0, 'flaky'), record(1, 'b')];
    const budget = { maxOutputBytes: 1e9, deadline: Infinity };
    expect((await handle(records, budget)).failure?.index).toBe(0);
    const lettered = await handle(records, budget);
    expect(lettered.outputs.map((o) => o[0].topic)).toEqual(['dead', 'out']);
    // Its commit failed (no call of `committed`): the log hands the same records over again.
    expect(lines).toHaveLength(0);
    const again = await handle(records, budget);
    expect(again.outputs.map((o) => o[0].topic)).toEqual(['dead', 'out']);
    expect(codec.decode('DeadLetter', again.outputs[0][0].value).attempts).toBe(2);
    again.committed?.();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ offset: '0', attempts: 2 });
    expect(counted.filter((o) => o === 'dead-lettered')).toHaveLength(1);
    // The record handled beside it is counted processed once too: three batches handled it, one committed.
    expect(counted.filter((o) => o === 'processed')).toHaveLength(1);
    // A batch that handled nothing has nothing to say once committed; one that did counts its records then.
    expect((await handle([], budget)).committed).toBeUndefined();
    const plain = await handle([record(2, 'c')], budget);
    expect(counted.filter((o) => o === 'processed')).toHaveLength(1);
    plain.committed?.();
    expect(counted.filter((o) => o === 'processed')).toHaveLength(2);
  });

  test('a backend outage is retried past the attempts, until it has lasted OUTAGE_RETRY_MS; then the record is dead-lettered', async () => {
    let clock = 1_000_000;
    const outage = new RegistryError('cosmos did not answer', 'registry-unavailable');
    const handle = withDeadLetteringBatch(inner((v) => (v === 'during' ? outage : null)), { ...options, now: () => clock });
    const records = [record(0, 'during')];
    for (let i = 0; i < 20; i++) {
      expect((await handle(records, { maxOutputBytes: 1e9, deadline: Infinity })).failure?.error).toBe(outage);
      clock += 20_000;
    }
    clock = 1_000_000 + OUTAGE_RETRY_MS;
    const last = await handle(records, { maxOutputBytes: 1e9, deadline: Infinity });
    expect(last.failure).toBeUndefined();
    expect(codec.decode('DeadLetter', last.outputs[0][0].value)).toMatchObject({ errorCode: 'registry-unavailable', attempts: 21 });
    // Not an outage: a store that says the body is not there is the record's own failure, out of attempts as before.
    expect(isBackendOutage(new ObjectStoreError('gone', 'not-found'))).toBe(false);
    expect(isBackendOutage(new ObjectStoreError('down', 'store-unavailable'))).toBe(true);
    expect(isBackendOutage(new EventLogError('down', 'log-unavailable'))).toBe(true);
    expect(isBackendOutage(new RegistryError('bad', 'corrupt-document'))).toBe(false);
  });
});

test('withSamples leaves what appending each sample in order leaves', () => {
  const s = (id: string): Sample => ({ executionId: id, receivedAt: 0, data: id });
  const sequential = (previous: Sample[], added: Sample[], keep: number) => added.reduce((kept, sample) => (kept.some((k) => k.executionId === sample.executionId) ? kept : [sample, ...kept].slice(0, keep)), previous);
  const cases: [string[], string[], number][] = [[[], ['a', 'b', 'c', 'd'], 3], [['a'], ['b', 'a', 'c'], 2], [['x', 'y'], ['z', 'x', 'w'], 1], [['a', 'b'], ['a', 'b'], 3]];
  for (const [previous, added, keep] of cases) {
    const expected = sequential(previous.map(s), added.map(s), keep);
    const got = withSamples(previous.map(s), added.map(s), keep);
    expect((got ?? previous.map(s)).map((x) => x.executionId)).toEqual(expected.map((x) => x.executionId));
  }
  expect(withSamples([s('a')], [s('a')], 3)).toBeNull();
});

test('records cross threads as one buffer, and come back with their values, keys and headers', () => {
  const pool = Buffer.from('xxhelloyyworld');
  const records = [{ ...record(7, ''), value: pool.subarray(2, 7) }, { ...record(8, ''), value: pool.subarray(9) }];
  const packed = packLogRecords(records);
  expect(packed.bytes.byteLength).toBe(10);
  const back = unpackLogRecords(structuredClone(packed));
  expect(back.map((r) => [r.offset, r.value.toString(), r.headers])).toEqual([['7', 'hello', { h: '' }], ['8', 'world', { h: '' }]]);
  const outputs = unpackOutputs(structuredClone(packOutputs([[out('a'), out('bb')], [], [out('c')]])));
  expect(outputs.map((o) => o.map((r) => r.value.toString()))).toEqual([['a', 'bb'], [], ['c']]);
});
