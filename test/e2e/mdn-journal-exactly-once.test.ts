import { journalInputs } from '../../services/journal/journal-stage';
import { mdnGroup } from '../../services/mdn/mdn-stage';
import { openRegistry } from '../../services/cli/backends';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { MdnOutcome } from '../../services/platform/avro/records';
import { loadConfig } from '../../services/platform/config/config';
import { MAX_JOURNAL_LIMIT } from '../../services/platform/registry/journal';
import { backendEnv } from '../support/app';
import { as2Headers } from '../support/as2-client';
import { createPeer } from '../support/as2-peer';
import { collectUntilQuiet } from '../support/log-reads';
import { putAsyncMdnWorkflow, startMdnReceiver, type MdnPost } from '../support/mdn-receiver';
import {
  clientIdOf, exactlyOnce, PipelineCluster, startLoad, until, workflowIdsCovering, type Load, type LoadResult, type Member,
} from '../support/pipeline-cluster';

/**
 * The two stages whose work leaves Kafka, on Kafka, while their process misbehaves: the mdn stage POSTs
 * asynchronous MDNs to a partner, the journal upserts entries to Cosmos DB, neither inside the log's transaction.
 * Receiver, decoder and dispatcher run in processes of their own, and the mdn and journal stages together in two
 * more (`--services mdn,journal`). Under a load of AS2 messages asking for asynchronous MDNs (one workflow per
 * partition, so that every mdn partition has deliveries) and of plain webhook calls:
 * 1. one mdn+journal process is frozen (SIGSTOP) past its 6 s session until the other holds every mdn
 *    partition, and thawed under load: a zombie with a batch in hand and its transactions open;
 * 2. a third mdn+journal process joins, takes partitions, and leaves (SIGTERM): two rebalances more.
 * Then, over everything the load was answered:
 * - every MDN owed (an AS2 message answered 200) reached the partner's server, every POST of one Message-ID
 *   carried the same bytes, and no POST came that nothing owed. A POST repeated is what docs/as2-async-mdn.md
 *   ("At least once") allows when a process crashed or lost its partition between a POST and its commit:
 *   repeats are counted in the note, not refused, except one POSTed twice while every process ran undisturbed
 *   (all ready, none frozen, joining or leaving yet), which the docs do not allow;
 * - each delivery's MdnOutcome was written once: one `delivered`, first attempt, per owed MDN, none for anything
 *   else (outcomes are in the attempt's transaction: exactly once, whoever POSTed);
 * - every request answered 200 was executed exactly once;
 * - the journal holds each of every request's entries once: received, decoded, execution-requested, and for
 *   AS2 as2-disposition and mdn-delivered (docs/request-journal.md, "Exactly once, in effect").
 */
const partitions = 6;
const SHORT_SESSION = { KAFKA_SESSION_TIMEOUT_MS: '6000', KAFKA_HEARTBEAT_INTERVAL_MS: '1000' };
const STAGES = 'mdn,journal' as const;
const EDI = 'ISA*00*~ST*850*0001~SE*2*0001~';
const codec = defaultAvroCodec();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const note = (what: string, facts: unknown) => process.stderr.write(`[mdn-journal-exactly-once] ${what}: ${JSON.stringify(facts)}\n`);

const WEBHOOK_JOURNEY = ['decoded', 'execution-requested', 'received'];
const AS2_JOURNEY = ['as2-disposition', 'decoded', 'execution-requested', 'mdn-delivered', 'received'];

/** `n` more answers of 200 than the load has now (bounded: fails saying what the load got instead). */
const accepts = (name: string, load: LoadResult, n: number) => {
  const target = load.accepted.length + n;
  return until(`${target} ${name} requests answered 200 (${load.refused.length} refused, ${load.failed} failed)`, () => load.accepted.length, (a) => a >= target, 60_000, 100);
};

interface MdnVerdict {
  owed: number;
  posts: number;
  /** POSTs beyond the first of a Message-ID: allowed (at least once), reported. */
  repeatedPosts: number;
  /** Owed MDNs whose outcomes are not exactly one `delivered` at the first attempt, with what they are (first 10). */
  outcomesNotOnce: { requestId: string; outcomes: string[] }[];
  /** Outcomes of requests the load was never answered for. */
  unknownOutcomes: number;
  /** Owed MDNs the partner never got (their outcome's Message-ID never POSTed, or no outcome at all), first 10. */
  lost: string[];
  /** Message-IDs POSTed with different bodies or paths. */
  postsDiffering: string[];
  /** POSTs whose Message-ID is no outcome's. */
  unknownPosts: number;
}

function mdnVerdict(owed: LoadResult, outcomes: MdnOutcome[], posts: MdnPost[]): MdnVerdict {
  const answered = new Set([...owed.accepted, ...owed.refused.flatMap((r) => (r.requestId ? [r.requestId] : []))]);
  const byRequest = new Map<string, MdnOutcome[]>();
  for (const o of outcomes) byRequest.set(o.requestId, [...byRequest.get(o.requestId) ?? [], o]);
  const byMessageId = new Map<string, MdnPost[]>();
  for (const p of posts) {
    const id = String(p.headers['message-id']);
    byMessageId.set(id, [...byMessageId.get(id) ?? [], p]);
  }
  const mdnMessageIds = new Set(outcomes.map((o) => o.mdnMessageId));
  return {
    owed: owed.accepted.length,
    posts: posts.length,
    repeatedPosts: posts.length - byMessageId.size,
    outcomesNotOnce: owed.accepted
      .map((requestId) => ({ requestId, outcomes: (byRequest.get(requestId) ?? []).map((o) => `${o.outcome}#${o.attempts}`) }))
      .filter((o) => o.outcomes.length !== 1 || o.outcomes[0] !== 'delivered#1').slice(0, 10),
    unknownOutcomes: outcomes.filter((o) => !answered.has(o.requestId)).length,
    lost: owed.accepted.filter((requestId) => !(byRequest.get(requestId) ?? []).some((o) => byMessageId.has(o.mdnMessageId))).slice(0, 10),
    postsDiffering: [...byMessageId].filter(([, ps]) => ps.some((p) => p.path !== ps[0].path || !p.body.equals(ps[0].body))).map(([id]) => id),
    unknownPosts: posts.filter((p) => !mdnMessageIds.has(String(p.headers['message-id']))).length,
  };
}

test('mdn and journal stages frozen past their session and thawed under load, then a third joining and leaving: every owed MDN POSTed, each MdnOutcome and journal entry once', async () => {
  const { env, cleanup } = backendEnv('real', { KAFKA_TOPIC_PARTITIONS: String(partitions), ...SHORT_SESSION, AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms' });
  const peer = createPeer();
  const mdns = await startMdnReceiver();
  /** When each POST arrived, relative to the misbehaviour: for telling where repeats came from. */
  const phaseOf = new Map<MdnPost, string>();
  let phase = 'start';
  const began = Date.now();
  /** Where the test is, for a run that hangs or is slow: the phase, its time and the counts so far. */
  const enter = (next: string) => { phase = next; note(next, { atMs: Date.now() - began, posts: mdns.posts.length }); };
  const answer = mdns.answer;
  let lastPostAt = Date.now();
  mdns.answer = (post) => { phaseOf.set(post, phase); lastPostAt = Date.now(); return answer(post); };
  let cluster: PipelineCluster | null = null;
  const loads: Load[] = [];
  const closers: (() => Promise<void>)[] = [];
  try {
    const hooks = workflowIdsCovering('wf-mj-hook-', partitions);
    const as2 = workflowIdsCovering('wf-mj-as2-', partitions, 1);
    cluster = await PipelineCluster.create(env, hooks);
    const c = cluster;
    // The credential (the receiver's key pair, MDNs allowed to the partner's server), then an AS2 workflow per partition.
    expect(await putAsyncMdnWorkflow(env, await peer.party('receiver'), mdns)).toBe(true);
    const registry = await openRegistry(loadConfig(env));
    try {
      const node = (await registry.workflows.get('wf-async'))!.nodes[0];
      for (const id of as2) await registry.workflows.put({ id, active: true, nodes: [node] });
    } finally {
      await registry.close();
    }
    await Promise.all((['receiver', 'decoder', 'dispatcher', STAGES, STAGES] as const).map((role) => c.start(role)));
    await c.waitReady();
    enter('steady');
    const holders = c.watchAssignments('mdn', 250);
    const executions = await c.watchExecutions();

    const webhooks = startLoad({ urls: () => c.receiverUrls(), workflowIds: hooks, ratePerSecond: 30, concurrency: 4, max: 5_000 });
    const messages = startLoad({
      urls: () => c.receiverUrls(), workflowIds: as2, ratePerSecond: 12, concurrency: 3, max: 2_000,
      request: (i) => ({
        workflowId: as2[i % as2.length],
        headers: as2Headers({ 'Disposition-Notification-Options': null, 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/mdn/${i}`, 'Content-Type': 'application/edi-x12' }),
        body: EDI,
      }),
    });
    loads.push(webhooks, messages);
    const [frozen, survivor] = c.byRole(STAGES);
    const facts: Record<string, unknown> = {};
    try {
      await accepts('AS2', messages, 30);
      await until('MDNs POSTed before the freeze', () => mdns.posts.length, (n) => n >= 20, 30_000, 100);

      // 1. The zombie: frozen until the other process holds every mdn partition (its session ended), thawed under load.
      enter('frozen');
      c.freeze(frozen);
      const t0 = Date.now();
      await until(`${survivor.name} to hold every mdn partition while ${frozen.name} is frozen`, () => holders.current,
        (held) => held.size === partitions && [...held.values()].every((id) => id === clientIdOf(survivor)), 30_000, 250);
      await sleep(1_000); // the journal's groups, frozen at the same moment with the same session, move over too
      facts.frozenMs = Date.now() - t0;
      c.thaw(frozen);
      enter('thawed');

      // 2. A rebalance: a third process joins, takes mdn partitions, and leaves under load. Its start (a few seconds:
      // it joins ten groups at once, each rebalancing) is the thawed zombie's time under load.
      const joiner: Member = await c.start(STAGES);
      enter('joined');
      await until(`${joiner.name} to hold mdn partitions`, () => holders.current, (held) => [...held.values()].includes(clientIdOf(joiner)), 30_000, 250);
      await accepts('AS2', messages, 30);
      await c.kill(joiner, 'SIGTERM');
      enter('left');
      await accepts('AS2', messages, 30);
      facts.mdnHolders = Object.fromEntries([...holders.holders].map(([p, ids]) => [p, [...ids]]));
      facts.members = Object.fromEntries(c.byRole(STAGES).map((m) => [m.name, clientIdOf(m)]));
    } catch (error) {
      throw new Error(`${(error as Error).message}; every process's output: ${c.saveOutputs('mdn-journal-exactly-once-failed')}`, { cause: error });
    }
    const hooked = await webhooks.stop();
    const owed = await messages.stop();
    enter('drain');

    // Drained: everything executed, every MDN owed has its outcome's record committed, every stage group at the end.
    const log = await c.log();
    const config = loadConfig(env);
    const groups = [
      { group: c.group('decoder'), topic: c.topics.received },
      { group: c.group('dispatcher'), topic: c.topics.decoded },
      ...[c.topics.mdnDeliveries, ...c.topics.mdnRetries].map((topic) => ({ group: mdnGroup(c.topics, topic), topic })),
      ...journalInputs(c.topics, [...new Set(Object.values(config.executionQueues))]),
    ];
    const accepted = [...hooked.accepted, ...owed.accepted];
    const answeredIds = new Set([...accepted, ...[...hooked.refused, ...owed.refused].flatMap((r) => (r.requestId ? [r.requestId] : []))]);
    await until('the pipeline to drain (every 200 executed, every stage group committed to the end, POSTs and executions quiet: a zombie\'s late POST is counted)', async () => {
      const lags = await Promise.all(groups.map(async ({ group, topic }) => ({ topic, lag: await log.consumerLag(group, topic).catch(() => -1) })));
      return { missing: executions.missing(accepted).length, lagging: lags.filter((l) => l.lag !== 0), posts: mdns.posts.length, quietForMs: Date.now() - Math.max(executions.lastRecordAt, lastPostAt) };
    }, (s) => s.missing === 0 && s.lagging.length === 0 && s.quietForMs >= 3_000, 90_000, 500).catch((error: Error) => {
      throw new Error(`${error.message}; every process's output: ${c.saveOutputs('mdn-journal-exactly-once-drain')}`, { cause: error });
    });

    enter('verdict');
    const outcomes = (await collectUntilQuiet(log, c.topics.mdnOutcomes, 2_000)).map((r) => codec.decode('MdnOutcome', r.value));
    const mdn = mdnVerdict(owed, outcomes, mdns.posts);
    const executed = exactlyOnce({ accepted, refused: [...hooked.refused, ...owed.refused], failed: hooked.failed + owed.failed }, executions);

    // The journal: every entry of every answered request once (an entry's id is its record's position: a record
    // written twice is two entries of one kind), and none of anything else; read workflow by workflow.
    enter('journal reads');
    const reader = await openRegistry(config);
    closers.push(() => reader.close());
    const kindsOf = new Map<string, string[]>();
    for (const workflowId of [...hooks, ...as2]) {
      const entries = await reader.journal.search({ workflowId, limit: MAX_JOURNAL_LIMIT });
      if (entries.length >= MAX_JOURNAL_LIMIT) throw new Error(`${workflowId} has ${MAX_JOURNAL_LIMIT} journal entries or more: spread the load over more workflows`);
      for (const e of entries) kindsOf.set(e.requestId, [...kindsOf.get(e.requestId) ?? [], e.kind]);
    }
    const as2Requests = new Set(owed.accepted);
    const journal = {
      entries: [...kindsOf.values()].reduce((n, kinds) => n + kinds.length, 0),
      /** Answered requests whose entries are not their journey's, each kind once (first 10). */
      wrong: accepted.map((requestId) => ({ requestId, kinds: (kindsOf.get(requestId) ?? []).sort() }))
        .filter(({ requestId, kinds }) => kinds.join() !== (as2Requests.has(requestId) ? AS2_JOURNEY : WEBHOOK_JOURNEY).join()).slice(0, 10),
      unknownRequests: [...kindsOf.keys()].filter((id) => !answeredIds.has(id)).length,
    };
    const repeats = new Map<string, string[]>();
    for (const p of mdns.posts) repeats.set(String(p.headers['message-id']), [...repeats.get(String(p.headers['message-id'])) ?? [], phaseOf.get(p) ?? '?']);
    // A repeat while every process ran undisturbed (after all were ready, before the freeze) is none the docs
    // allow: no process crashed or lost a partition. Named with who POSTed it when, and the fences of those processes.
    const lines = logLines(c);
    const unexplainedRepeats = [...repeats].filter(([, phases]) => phases.filter((ph) => ph === 'steady').length > 1).map(([messageId]) => ({
      messageId,
      posts: lines.filter((l) => l.msg === 'as2.mdn-delivered' && l.mdnMessageId === messageId).map((l) => `${l.member} ${l.time} partition of ${String(l.workflowId)}`),
      fenced: lines.filter((l) => String(l.msg).startsWith('kafka stage fenced') && String(l.stage).endsWith('ingress-mdn')).map((l) => `${l.member} ${l.time} partition ${String(l.partition)} ${String(l.error)}`),
      joins: lines.filter((l) => l.msg === 'kafka stage joined its group' && String(l.stage).endsWith('ingress-mdn')).map((l) => `${l.member} ${l.time} ${String(l.partitions)}`),
    }));
    note('verdict', {
      outputs: c.saveOutputs('mdn-journal-exactly-once'), ...facts, mdn, executed, journal,
      refused: hooked.refused.length + owed.refused.length, failed: hooked.failed + owed.failed,
      repeatedPostsByPhase: [...repeats.values()].filter((ps) => ps.length > 1).slice(0, 20), unexplainedRepeats,
    });

    expect(mdn).toEqual({ ...mdn, outcomesNotOnce: [], unknownOutcomes: 0, lost: [], postsDiffering: [], unknownPosts: 0 });
    expect(mdn.owed).toBeGreaterThan(100);
    expect(unexplainedRepeats).toEqual([]);
    expect(executed).toEqual({ ...executed, doubles: 0, doubledRequests: 0, doubledExecutionIds: 0, missing: 0, unknown: 0 });
    expect(journal).toEqual({ entries: hooked.accepted.length * WEBHOOK_JOURNEY.length + owed.accepted.length * AS2_JOURNEY.length, wrong: [], unknownRequests: 0 });
  } finally {
    for (const load of loads) await load.stop();
    await cluster?.close();
    for (const close of closers) await close().catch(() => undefined);
    await mdns.close();
    peer.cleanup();
    cleanup();
  }
}, 300_000);

/** Every JSON log line of every member process, with the member's name. */
function logLines(c: PipelineCluster): Record<string, unknown>[] {
  return c.members.flatMap((m) => [...m.previousOutputs, m.proc.output()].join('\n').split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return [];
    try { return [{ member: m.name, ...(JSON.parse(line) as Record<string, unknown>) }]; } catch { return []; }
  }));
}
