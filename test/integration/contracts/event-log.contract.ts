import { randomUUID } from 'node:crypto';
import type { EventLog, LogRecord, OutRecord } from '../../../services/platform/log/event-log';
import { MAX_STAGE_BATCH_BYTES } from '../../../services/platform/log/topics';
import { eachRecord, STAGE_BATCH_MAX_MS } from '../../../services/platform/log/stage-batch';
import { withDeadLetteringBatch } from '../../../services/platform/log/dead-lettering';
import { defaultAvroCodec } from '../../../services/platform/avro/codec';
import { silentLogger } from '../../../services/platform/logger/logger';
import { collect, collectUntilQuiet } from '../../support/log-reads';

/**
 * The EventLog contract: every adapter (embedded journal, Kafka) must pass it unchanged.
 * `open` returns a fresh handle on the same backing log each time it is called within one test.
 */
export interface EventLogFixture {
  open(): Promise<EventLog>;
  /** Close and forget everything the fixture opened. */
  cleanup(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `done()` holds (polled), or rejects after `timeoutMs`. */
async function until(done: () => boolean, timeoutMs = 60_000): Promise<void> {
  const stopAt = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > stopAt) throw new Error(`not done within ${timeoutMs} ms`);
    await sleep(20);
  }
}

const topicName = (what: string) => `contract.${what}.${randomUUID().slice(0, 8)}`;
const rec = (topic: string, key: string | null, value: string, headers: Record<string, string> = {}): OutRecord => ({ topic, key, value: Buffer.from(value), headers });

/** A stage test's input and output topics, created, and a group of its own. */
async function stageTopics(log: EventLog, what: string): Promise<{ input: string; output: string; group: string }> {
  const input = topicName(`${what}-in`);
  const output = topicName(`${what}-out`);
  await log.ensureTopics([input, output]);
  return { input, output, group: `contract-${what}-${randomUUID().slice(0, 8)}` };
}

export function describeEventLogContract(name: string, makeFixture: () => EventLogFixture): void {
  describe(`EventLog contract: ${name}`, () => {
    let fixture: EventLogFixture;
    beforeEach(() => { fixture = makeFixture(); });
    afterEach(async () => { await fixture.cleanup(); });

    test('appended records read back in order with key, value and headers', async () => {
      const log = await fixture.open();
      const topic = topicName('order');
      await log.ensureTopics([topic]);
      await log.append([rec(topic, 'wf-1', 'one', { traceparent: '00-abc-def-01' }), rec(topic, 'wf-1', 'two')]);
      await log.append([rec(topic, 'wf-1', 'three')]);
      const got = await collect(log, topic, 3);
      expect(got.map((r) => r.value.toString())).toEqual(['one', 'two', 'three']);
      expect(got[0].key).toBe('wf-1');
      expect(got[0].headers.traceparent).toBe('00-abc-def-01');
      expect(Number(got[1].offset)).toBeGreaterThan(Number(got[0].offset));
      expect(got[0].timestamp).toBeGreaterThan(Date.now() - 600_000);
    });

    test('concurrent appends are all acknowledged and all readable', async () => {
      const log = await fixture.open();
      const topic = topicName('concurrent');
      await log.ensureTopics([topic]);
      await Promise.all(Array.from({ length: 200 }, (_, i) => log.append([rec(topic, 'wf-same', `m${i}`)])));
      const got = await collect(log, topic, 200);
      expect(new Set(got.map((r) => r.value.toString())).size).toBe(200);
    });

    test('settled() resolves when no append was given up: nothing of this log can land any more', async () => {
      const log = await fixture.open();
      const topic = topicName('settled');
      await log.ensureTopics([topic]);
      await expect(log.settled()).resolves.toBeUndefined();
      await log.append([rec(topic, 'k', 'acknowledged')]);
      await expect(log.settled()).resolves.toBeUndefined();
    });

    test('a reader that follows the log sees records appended later', async () => {
      const log = await fixture.open();
      const topic = topicName('follow');
      await log.ensureTopics([topic]);
      const reading = collect(log, topic, 2);
      await new Promise((r) => setTimeout(r, 300));
      await log.append([rec(topic, 'k', 'late-1')]);
      await log.append([rec(topic, 'k', 'late-2')]);
      expect((await reading).map((r) => r.value.toString())).toEqual(['late-1', 'late-2']);
    });

    test('reading from an offset and from a time skips what came before', async () => {
      const log = await fixture.open();
      const topic = topicName('seek');
      await log.ensureTopics([topic]);
      await log.append([rec(topic, 'k', 'a'), rec(topic, 'k', 'b')]);
      const all = await collect(log, topic, 2);
      await new Promise((r) => setTimeout(r, 20));
      const mark = Date.now();
      await new Promise((r) => setTimeout(r, 20));
      await log.append([rec(topic, 'k', 'c')]);
      const fromOffset: string[] = [];
      for await (const r of log.read(topic, { start: { from: 'offset', offset: all[1].offset, partition: all[1].partition }, signal: AbortSignal.timeout(20_000) })) {
        fromOffset.push(r.value.toString());
        if (fromOffset.length === 2) break;
      }
      expect(fromOffset).toEqual(['b', 'c']);
      const fromTime: string[] = [];
      for await (const r of log.read(topic, { start: { from: 'time', timestamp: mark }, signal: AbortSignal.timeout(20_000) })) {
        fromTime.push(r.value.toString());
        break;
      }
      expect(fromTime).toEqual(['c']);
    });

    test('a stage turns each input into its outputs exactly once, across a stop and a restart', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'stage');
      await log.append(Array.from({ length: 20 }, (_, i) => rec(input, `wf-${i % 3}`, `in-${i}`)));
      const handle = async (r: LogRecord) => [rec(output, r.key, `out-of-${r.value.toString()}`)];
      const first = await log.runStage({ group, topic: input, handle });
      await collect(log, output, 20);
      await first.stop();
      await log.append(Array.from({ length: 5 }, (_, i) => rec(input, 'wf-late', `in-late-${i}`)));
      const again = await log.runStage({ group, topic: input, handle });
      await collect(log, output, 25);
      const outputs = await collectUntilQuiet(log, output, 2_000);
      await again.stop();
      const values = outputs.map((r) => r.value.toString()).sort();
      expect(values).toHaveLength(25);
      expect(new Set(values).size).toBe(25);
      expect(values).toContain('out-of-in-late-4');
    });

    test('a stage ends its batch once its outputs reach MAX_STAGE_BATCH_BYTES, not only at its record count', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'big');
      await log.append(Array.from({ length: 6 }, (_, i) => rec(input, 'wf-big', `in-${i}`)));
      const outputSize = 7 * 1024 * 1024;
      const perBatch = Math.ceil(MAX_STAGE_BATCH_BYTES / outputSize);
      // What the stage had committed when each input came to it: a batch's outputs appear only once it ends
      // (on Kafka a moment after its transaction commits, when the markers are written: hence the wait).
      const committedBefore: number[] = [];
      const committed = async () => (await log.endOffsets(output)).reduce((n, p) => n + Number(p.offset), 0);
      let seen = 0;
      const stage = await log.runStage({
        group, topic: input,
        handle: async (r) => {
          let now = await committed();
          if (seen++ === perBatch) {
            for (const deadline = Date.now() + 10_000; now < perBatch && Date.now() < deadline;) {
              await new Promise((done) => setTimeout(done, 50));
              now = await committed();
            }
          }
          committedBefore.push(now);
          return [{ topic: output, key: r.key, value: Buffer.alloc(outputSize, 0x61), headers: {} }];
        },
      });
      await collect(log, output, 6, 60_000);
      await stage.stop();
      expect(committedBefore[0]).toBe(0);
      expect(committedBefore[perBatch]).toBeGreaterThanOrEqual(perBatch);
    }, 120_000);

    test('end offsets, offsets for a time, missing topics, and a group\'s lag (replay and metrics rely on them)', async () => {
      const log = await fixture.open();
      const topic = topicName('positions');
      const output = topicName('positions-out');
      const group = `contract-lag-${randomUUID().slice(0, 8)}`;
      await log.ensureTopics([topic, output]);
      expect(await log.missingTopics([topic])).toEqual([]);
      await log.append([rec(topic, 'k', 'a'), rec(topic, 'k', 'b')]);
      const between = Date.now() + 1;
      await new Promise((r) => setTimeout(r, 5));
      await log.append([rec(topic, 'k', 'c')]);
      const total = (await log.endOffsets(topic)).reduce((n, p) => n + Number(p.offset), 0);
      expect(total).toBe(3);
      // Nothing deleted: every partition starts at 0, and the first offsets name the same partitions as the ends.
      expect((await log.firstOffsets(topic)).map((p) => p.offset)).toEqual((await log.endOffsets(topic)).map(() => '0'));
      expect((await log.firstOffsets(topic)).map((p) => p.partition)).toEqual((await log.endOffsets(topic)).map((p) => p.partition));
      const atTime = await log.offsetsForTime(topic, between);
      expect(atTime.reduce((n, p) => n + Number(p.offset), 0)).toBe(2);
      expect(await log.consumerLag(group, topic)).toBe(3);
      const stage = await log.runStage({ group, topic, handle: async (r) => [rec(output, r.key, r.value.toString())] });
      await collect(log, output, 3);
      let lag = await log.consumerLag(group, topic);
      while (lag > 0) { await new Promise((r) => setTimeout(r, 100)); lag = await log.consumerLag(group, topic); }
      expect(stage.notReady()).toBeNull();
      await stage.stop();
    });

    test('a batch handler gets the records in order, several at a time, and each output commits exactly once across a restart', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'batch');
      await log.append(Array.from({ length: 30 }, (_, i) => rec(input, 'wf-batch', `in-${i}`)));
      const sizes: number[] = [];
      const seen: string[] = [];
      const handleBatch = async (records: LogRecord[]) => {
        sizes.push(records.length);
        for (const r of records) seen.push(r.value.toString());
        return { outputs: records.map((r) => [rec(output, r.key, `out-of-${r.value.toString()}`)]) };
      };
      const first = await log.runStage({ group, topic: input, handleBatch });
      await collect(log, output, 30);
      await first.stop();
      await log.append(Array.from({ length: 5 }, (_, i) => rec(input, 'wf-batch', `in-late-${i}`)));
      const again = await log.runStage({ group, topic: input, handleBatch });
      await collect(log, output, 35);
      const outputs = await collectUntilQuiet(log, output, 2_000);
      await again.stop();
      expect(outputs.map((r) => r.value.toString())).toEqual([...Array.from({ length: 30 }, (_, i) => `out-of-in-${i}`), ...Array.from({ length: 5 }, (_, i) => `out-of-in-late-${i}`)]);
      expect(Math.max(...sizes)).toBeGreaterThan(1);
      // In order within the batches, and nothing handled again after the stop committed it.
      expect(seen.slice(0, 30)).toEqual(Array.from({ length: 30 }, (_, i) => `in-${i}`));
      expect(seen.filter((v) => v === 'in-0')).toHaveLength(1);
    });

    test('a batch handler that fails at one record commits the records before it and is given the failed one again', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'batch-fail');
      await log.append(['a', 'b', 'c', 'd'].map((v) => rec(input, 'k', v)));
      let failed = false;
      const retried: (string | null)[] = [];
      const firsts: string[] = [];
      const stage = await log.runStage({
        group, topic: input,
        handleBatch: async (records) => {
          firsts.push(records[0].value.toString());
          const outputs = [];
          for (const [index, r] of records.entries()) {
            if (r.value.toString() === 'c' && !failed) { failed = true; return { outputs, failure: { index, error: new Error('transient') } }; }
            outputs.push([rec(output, r.key, `ok-${r.value.toString()}`)]);
          }
          return { outputs };
        },
        onRetry: (_error, record) => retried.push(record?.value.toString() ?? null),
      });
      await collect(log, output, 4);
      const outputs = await collectUntilQuiet(log, output, 2_000);
      await stage.stop();
      expect(outputs.map((r) => r.value.toString())).toEqual(['ok-a', 'ok-b', 'ok-c', 'ok-d']);
      expect(retried).toEqual(['c']);
      expect(firsts).toContain('c');
    });

    test('a batch result\'s committed hook is called once its outputs are committed, never for a batch that committed nothing', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'batch-committed');
      await log.append(['a', 'b', 'c'].map((v) => rec(input, 'k', v)));
      const calls: { outputs: number; committed: number }[] = [];
      const stage = await log.runStage({
        group, topic: input,
        handleBatch: async (records) => {
          const call = { outputs: 0, committed: 0 };
          calls.push(call);
          const committed = () => { call.committed++; };
          if (calls.length === 1) return { outputs: [], failure: { index: 0, error: new Error('transient') }, committed };
          call.outputs = records.length;
          return { outputs: records.map((r) => [rec(output, r.key, `ok-${r.value.toString()}`)]), committed };
        },
      });
      await collect(log, output, 3);
      await until(() => calls.some((c) => c.committed > 0), 10_000);
      await stage.stop();
      expect(calls[0]).toEqual({ outputs: 0, committed: 0 });
      expect(calls.every((c) => c.committed <= 1 && (c.committed === 0 || c.outputs > 0))).toBe(true);
    });

    // A hook runs after the commit: if its fault failed the batch, a committed batch was retried (embedded) or the
    // consumer restarted (Kafka: eachBatch threw).
    test('a committed hook that throws is not a failed commit: nothing is retried, and later records are handled once each', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'batch-hook-throws');
      await log.append(['a', 'b'].map((v) => rec(input, 'k', v)));
      const retries: unknown[] = [];
      let hooks = 0;
      const stage = await log.runStage({
        group, topic: input,
        handleBatch: async (records) => ({
          outputs: records.map((r) => [rec(output, r.key, `ok-${r.value.toString()}`)]),
          committed: () => { hooks++; throw new Error('hook fault'); },
        }),
        onRetry: (error) => { retries.push(error); },
      });
      try {
        await collect(log, output, 2);
        await until(() => hooks > 0, 10_000);
        await log.append(['c', 'd'].map((v) => rec(input, 'k', v)));
        await collect(log, output, 4);
        await until(() => hooks > 1, 10_000);
      } finally {
        await stage.stop();
      }
      expect(retries).toEqual([]);
      const values = (await collectUntilQuiet(log, output, 500)).map((r) => r.value.toString());
      expect(values).toEqual(['ok-a', 'ok-b', 'ok-c', 'ok-d']);
    });

    test('a batch handler that throws commits nothing and is given the batch again, still its partition\'s first since owned', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'batch-throw');
      await log.append(['a', 'b'].map((v) => rec(input, 'k', v)));
      const calls: [string, boolean | undefined][] = [];
      const retried: (string | null)[] = [];
      const stage = await log.runStage({
        group, topic: input,
        // What the decoder's handler does when a read-back before its guarded handling fails (decoder.ts).
        handleBatch: async (records, budget) => {
          calls.push([records[0].value.toString(), budget.firstSinceOwned]);
          if (calls.length === 1) throw new Error('transient, before any record');
          return { outputs: records.map((r) => [rec(output, r.key, `ok-${r.value.toString()}`)]) };
        },
        onRetry: (_error, record) => retried.push(record?.value.toString() ?? null),
      });
      await collect(log, output, 2);
      const outputs = await collectUntilQuiet(log, output, 2_000);
      await stage.stop();
      expect(outputs.map((r) => r.value.toString())).toEqual(['ok-a', 'ok-b']);
      expect(calls.slice(0, 2)).toEqual([['a', true], ['a', true]]);
      expect(retried).toEqual([null]);
    });

    test('a batch handler that stops early (its output budget) is given the rest in the next batch', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'batch-budget');
      await log.append(Array.from({ length: 6 }, (_, i) => rec(input, 'k', `in-${i}`)));
      const budgets: number[] = [];
      const deadlines: number[] = [];
      const stage = await log.runStage({
        group, topic: input,
        // Two records a call at most, as a handler whose outputs reached the budget would.
        handleBatch: async (records, budget) => {
          budgets.push(budget.maxOutputBytes);
          deadlines.push(budget.deadline - Date.now());
          return { outputs: records.slice(0, 2).map((r) => [rec(output, r.key, `out-of-${r.value.toString()}`)]) };
        },
      });
      await collect(log, output, 6);
      const outputs = await collectUntilQuiet(log, output, 2_000);
      await stage.stop();
      expect(outputs.map((r) => r.value.toString())).toEqual(Array.from({ length: 6 }, (_, i) => `out-of-in-${i}`));
      expect(budgets.every((b) => b === MAX_STAGE_BATCH_BYTES)).toBe(true);
      // Each call's deadline lies ahead of it, by at most the stage batch time.
      expect(deadlines.every((d) => d > 0 && d <= STAGE_BATCH_MAX_MS)).toBe(true);
    });

    test('a handler that fails is retried and its record is not skipped', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'retry');
      await log.append([rec(input, 'k', 'flaky'), rec(input, 'k', 'fine')]);
      let failures = 0;
      const retries: number[] = [];
      const stage = await log.runStage({
        group,
        topic: input,
        handle: async (r) => {
          if (r.value.toString() === 'flaky' && failures < 2) { failures++; throw new Error('transient'); }
          return [rec(output, r.key, `ok-${r.value.toString()}`)];
        },
        onRetry: (_error, _record, attempt) => retries.push(attempt),
      });
      const got = await collect(log, output, 2);
      await stage.stop();
      expect(got.map((r) => r.value.toString())).toEqual(['ok-flaky', 'ok-fine']);
      expect(retries).toEqual([1, 2]);
    });

    // The back-off is for a record that keeps failing: records that each fail once (a blob 503, throttling) are
    // normal, and if they raised it, the pause grew to 30 s however rarely anything failed (and a poison record
    // after them held its partition for a minute instead of its 5 attempts' second or two).
    test('records that each fail once back off from the start each time: the back-off counts one record\'s failures in a row', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'backoff-reset');
      const count = 60;
      await log.append(Array.from({ length: count }, (_, i) => rec(input, 'k', `in-${i}`)));
      const failedOnce = new Set<string>();
      const handled = new Set<string>();
      const attempts: number[] = [];
      const stage = await log.runStage({
        group, topic: input,
        handle: async (r) => {
          if (Number(r.offset) % 10 === 9 && !failedOnce.has(r.offset)) { failedOnce.add(r.offset); throw new Error('transient'); }
          handled.add(r.offset);
          return [rec(output, r.key, `ok-${r.value.toString()}`)];
        },
        onRetry: (_error, _record, attempt) => attempts.push(attempt),
      });
      try {
        // Done, or the back-off climbs (without waiting out its growing pauses).
        await until(() => handled.size === count || attempts.some((a) => a > 2));
      } finally {
        await stage.stop();
      }
      // 1 each time; 2 allows for one failed commit among them (Kafka).
      expect(Math.max(...attempts)).toBeLessThanOrEqual(2);
      expect(attempts.length).toBeGreaterThanOrEqual(count / 10);
      expect(handled.size).toBe(count);
    });

    test('a poison record after records that each failed once is dead-lettered after exactly 5 attempts, its pauses backed off as attempts 1 to 4', async () => {
      const log = await fixture.open();
      const { input, output, group } = await stageTopics(log, 'backoff-poison');
      const deadLetters = topicName('backoff-poison-dlq');
      await log.ensureTopics([deadLetters]);
      const codec = defaultAvroCodec();
      const poison = 45;
      await log.append(Array.from({ length: 50 }, (_, i) => rec(input, 'k', `in-${i}`)));
      const failedOnce = new Set<number>();
      const poisonAttempts: number[] = [];
      let lettered = false;
      const handleBatch = withDeadLetteringBatch((records, budget) => eachRecord(records, budget, (r) => {
        const offset = Number(r.offset);
        if (offset === poison) throw new Error('poison');
        if (offset < poison && offset % 10 === 9 && !failedOnce.has(offset)) { failedOnce.add(offset); throw new Error('transient'); }
        return [rec(output, r.key, `ok-${r.value.toString()}`)];
      }), {
        stage: 'contract', topic: deadLetters, codec, recordKey: 'workflow',
        logger: { ...silentLogger, warn: (message) => { if (message === 'record dead-lettered') lettered = true; } },
      });
      const stage = await log.runStage({
        group, topic: input, handleBatch,
        onRetry: (_error, record, attempt) => { if (record && Number(record.offset) === poison) poisonAttempts.push(attempt); },
      });
      try {
        // Dead-lettered, or its back-off already started past 1 (without waiting out the longer pauses).
        await until(() => lettered || (poisonAttempts.length > 0 && poisonAttempts[0] !== 1));
      } finally {
        await stage.stop();
      }
      expect(failedOnce.size).toBe(4);
      expect(poisonAttempts).toEqual([1, 2, 3, 4]);
      const [letter] = await collect(log, deadLetters, 1);
      const decoded = codec.decode('DeadLetter', letter.value);
      expect(decoded.attempts).toBe(5);
      expect(decoded.source.offset).toBe(String(poison));
    });
  });
}
