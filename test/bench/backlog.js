// How far the stages are behind the receiver, read from the log by the benchmark process, not asked of the
// service: on the embedded log through a read-only opener (the CLI's tail uses it; it reads the files the
// service writes and takes no lock), on Kafka through the stage groups' committed offsets.
// `backlog` is accepted requests without their execution record yet; `lag` is every stage group's lag
// summed (sampler and journal included), so a stage that falls behind while executions keep pace shows too.
const path = require('node:path');
const { ROOT } = require('./support');

const dist = (p) => require(path.join(ROOT, 'dist/services', p));
const { pipelineTopics } = dist('platform/log/topics');
const { journalInputs } = dist('journal/journal-stage');
const { samplerGroup } = dist('sampler/sampler');

const total = (offsets) => offsets.reduce((n, p) => n + Number(p.offset), 0);

/** Every stage group of the default pipeline (one execution queue) with its input topic. */
function stageInputs(topics) {
  return [
    [topics.group('decoder'), topics.received],
    [topics.group('dispatcher'), topics.decoded],
    [samplerGroup(topics, topics.executions), topics.executions],
    ...journalInputs(topics, [topics.executions]).map((i) => [i.group, i.topic]),
  ];
}

async function lagOf(log, topics) {
  const lags = await Promise.all(stageInputs(topics).map(([group, topic]) => log.consumerLag(group, topic)));
  return lags.reduce((a, b) => a + b, 0);
}

/** A probe of the embedded log under `dataDir`, written by another process. */
async function embeddedProbe(dataDir) {
  const { openEmbeddedLog } = dist('platform/log/embedded/embedded-log');
  const log = await openEmbeddedLog({ dataDir, readOnly: true });
  const topics = pipelineTopics('');
  return {
    async snapshot() {
      // endOffsets of a read-only log first picks up what the writer appended since the last look.
      const accepted = total(await log.endOffsets(topics.received));
      const executions = total(await log.endOffsets(topics.executions));
      const deadLetters = total(await log.endOffsets(topics.deadLetter));
      return { at: Date.now(), accepted, executions, deadLetters, backlog: accepted - executions, lag: await lagOf(log, topics) };
    },
    close: () => log.close(),
  };
}

/**
 * A probe of the pipeline on Kafka under `topics` (the run's prefix). Execution records are written in
 * transactions, whose markers take offsets too, so the backlog is the decoder's and the dispatcher's lag,
 * which pipeline.js has always waited on, not a difference of end offsets.
 */
function kafkaProbe(log, topics) {
  return {
    async snapshot() {
      const [accepted, deadLetters, decoderLag, dispatcherLag, lag] = await Promise.all([
        log.endOffsets(topics.received).then(total), log.endOffsets(topics.deadLetter).then(total),
        log.consumerLag(topics.group('decoder'), topics.received), log.consumerLag(topics.group('dispatcher'), topics.decoded),
        lagOf(log, topics),
      ]);
      return { at: Date.now(), accepted, executions: accepted - decoderLag - dispatcherLag, deadLetters, backlog: decoderLag + dispatcherLag, lag };
    },
    close: async () => undefined,
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls until nothing is left (backlog and every stage's lag 0); resolves with the seconds that took, the
 * seconds until the backlog alone reached 0 and, with `expected`, until the first execution record appeared. Throws after `timeoutSeconds`: executions that never catch up
 * void the run.
 */
async function waitForDrain(probe, { timeoutSeconds, every = 200, expected, since = Date.now() }) {
  const t0 = since;
  let backlogSeconds = null;
  let firstExecutionSeconds = null;
  for (;;) {
    // A group coordinator still loading answers with an error for a moment: look again.
    const s = await probe.snapshot().catch(() => null);
    if (!s) {
      if (Date.now() - t0 > timeoutSeconds * 1000) throw new Error(`the log could not be read for ${timeoutSeconds} s`);
      await sleep(every);
      continue;
    }
    if (s.deadLetters > 0) throw new Error(`${s.deadLetters} records were dead-lettered: executions will never catch up`);
    if (firstExecutionSeconds === null && expected !== undefined && s.executions > 0) firstExecutionSeconds = (Date.now() - t0) / 1000;
    const caughtUp = s.backlog <= 0 && (expected === undefined || s.executions >= expected);
    if (caughtUp && backlogSeconds === null) backlogSeconds = (Date.now() - t0) / 1000;
    if (caughtUp && s.lag <= 0) return { backlogSeconds, firstExecutionSeconds, allSeconds: (Date.now() - t0) / 1000, last: s };
    if (Date.now() - t0 > timeoutSeconds * 1000) {
      throw new Error(`executions did not catch up within ${timeoutSeconds} s: ${s.accepted} accepted, ${s.executions} executions, lag of all stages ${s.lag}`);
    }
    await sleep(every);
  }
}

module.exports = { embeddedProbe, kafkaProbe, waitForDrain, stageInputs };
