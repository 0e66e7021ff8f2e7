import { writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import * as path from 'node:path';
import { AssignerProtocol, Kafka, logLevel, Partitioners, type Admin } from 'kafkajs';
import { openRegistry } from '../../services/cli/backends';
import type { WorkflowNode } from '../../services/platform/registry/documents';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { loadConfig } from '../../services/platform/config/config';
import type { LogRecord } from '../../services/platform/log/event-log';
import { openKafkaLog, type KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { stableCommittedOffsets, useStableOffsetFetch } from '../../services/platform/log/kafka/stable-offset-fetch';
import { pipelineTopics, type PipelineTopics } from '../../services/platform/log/topics';
import { collectUntilQuiet } from './log-reads';
import { runCli, startServiceProcess, waitForExit, type ServiceProcess } from './cli-process';
import { getFreePort } from './servers';

/**
 * A pipeline of separate stage processes on real Kafka, as production runs it: N receivers, decoders and
 * dispatchers, each `ingress start --services <role>` with an admin port of its own, plus what a test needs
 * around them: a bounded load of POSTs, a watch of the execution queue, a watch of the stage groups' committed
 * offsets (which must never go backwards), the groups' assignments, and freezing (SIGSTOP), killing and
 * restarting single processes. `close()` thaws and ends every process it started, whatever state it is in.
 * A role is the `--services` list its processes run (`mdn,journal`: the two stages with side effects outside
 * Kafka's transactions, in one process).
 */
export type Role = 'receiver' | 'decoder' | 'dispatcher' | 'mdn,journal';

/**
 * How long a process of the role may take to start. One running the mdn stage and the journal joins ten consumer
 * groups before it says it started: at once (start-together.ts), ~6 s under load, but each join is a rebalance
 * that waits for the group's members, so more beside another Kafka test on two cores.
 */
const upWithin = (role: string) => (role.includes('mdn') || role.includes('journal') ? 90_000 : 30_000);

/** A stage whose group's assignments can be watched, by its (first) input topic. */
export type WatchedStage = 'decoder' | 'dispatcher' | 'mdn';

export interface Member {
  role: Role;
  /** e.g. `decoder-2`; a restarted member keeps its name. */
  name: string;
  adminPort: number;
  env: Record<string, string>;
  proc: ServiceProcess;
  frozen: boolean;
  /** How many times this member was started (1 for the first process). */
  starts: number;
  /** Output of the processes this member had before a restart. */
  previousOutputs: string[];
}

/**
 * Workflow ids whose records (keyed by workflow id, kafkajs's default partitioner as the receiver uses it) land
 * `perPartition` on each of `partitions` partitions, so that every stage replica has work.
 */
export function workflowIdsCovering(prefix: string, partitions: number, perPartition = 2): string[] {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({ partitionId, leader: 0, replicas: [0], isr: [0], partitionErrorCode: 0 }));
  const counts = new Array<number>(partitions).fill(0);
  const ids: string[] = [];
  for (let n = 0; ids.length < partitions * perPartition && n < 10_000; n++) {
    const id = `${prefix}${n}`;
    const p = partitioner({ topic: 'any', partitionMetadata, message: { key: id, value: null } });
    if (counts[p] < perPartition) { counts[p]++; ids.push(id); }
  }
  return ids;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Probe until `ok`; after `patienceMs` fail with what was awaited and the last value seen (not a bare jest timeout). */
export async function until<T>(what: string, probe: () => Promise<T> | T, ok: (v: T) => boolean, patienceMs = 90_000, everyMs = 250): Promise<T> {
  let last: T | undefined;
  let lastError: unknown;
  for (const deadline = Date.now() + patienceMs; Date.now() < deadline;) {
    try {
      const v = await probe();
      if (ok(v)) return v;
      last = v;
    } catch (error) {
      lastError = error;
    }
    await sleep(everyMs);
  }
  const seen = last === undefined ? `error ${String(lastError)}` : JSON.stringify(last, (_k, v) => (v instanceof Map ? Object.fromEntries(v) : v instanceof Set ? [...v] : v));
  throw new Error(`gave up after ${patienceMs} ms waiting for ${what}; last seen: ${seen?.slice(0, 600)}`);
}

/** Every child any cluster started, SIGKILLed when the test process exits however it exits. */
const everyChild = new Set<ServiceProcess['child']>();
let exitHook = false;
function track(child: ServiceProcess['child']): void {
  everyChild.add(child);
  child.once('exit', () => everyChild.delete(child));
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => { for (const c of everyChild) try { c.kill('SIGKILL'); } catch { /* gone */ } });
  }
}

export class PipelineCluster {
  readonly members: Member[] = [];
  readonly topics: PipelineTopics;
  private readonly kafka: Kafka;
  private adminClient: Promise<Admin> | null = null;
  private logClient: Promise<KafkaEventLog> | null = null;
  private readonly closers: (() => Promise<void> | void)[] = [];

  private constructor(readonly env: Record<string, string>) {
    this.topics = pipelineTopics(env.INGRESS_TOPIC_PREFIX ?? '');
    this.kafka = new Kafka({ clientId: 'pipeline-cluster-test', brokers: env.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING, retry: { retries: 10, initialRetryTime: 200, maxRetryTime: 2_000 } });
  }

  /** `ingress topics apply` (with the env's KAFKA_TOPIC_PARTITIONS) and an active webhook workflow per id, in the env's registry. */
  /** `trigger`: the one node of every workflow made (a plain webhook unless a test needs options). */
  static async create(env: Record<string, string>, workflowIds: string[], trigger: WorkflowNode = { name: 'Hook', type: 'webhook' }): Promise<PipelineCluster> {
    const cluster = new PipelineCluster(env);
    const applied = await runCli(['topics', 'apply'], env);
    if (applied.code !== 0) throw new Error(`ingress topics apply failed (${applied.code}): ${applied.stderr}`);
    const registry = await openRegistry(loadConfig(env));
    try {
      for (const id of workflowIds) await registry.workflows.put({ id, active: true, nodes: [trigger] });
    } finally {
      await registry.close();
    }
    return cluster;
  }

  /** The group of a stage (the mdn stage's of its deliveries topic; its retry topics have groups of their own). */
  group(stage: WatchedStage): string {
    return this.topics.group(stage);
  }

  /**
   * One admin client, however many callers ask at once (the two offset watches start together): the promise is
   * kept, not the client, so that a second caller does not connect a second admin that close() never sees.
   */
  admin(): Promise<Admin> {
    this.adminClient ??= (async () => {
      const admin = this.kafka.admin();
      try {
        await admin.connect();
      } catch (error) {
        await admin.disconnect().catch(() => undefined);
        throw error;
      }
      return admin;
    })().catch((error: unknown) => {
      this.adminClient = null; // a broker down for a moment: the next caller connects again
      throw error;
    });
    return this.adminClient;
  }

  /** An EventLog client in this process, for reading topics (read_committed) and consumer lag; one, as admin(). */
  log(): Promise<KafkaEventLog> {
    this.logClient ??= openKafkaLog({ brokers: this.env.KAFKA_BROKERS.split(','), clientId: 'pipeline-cluster-reader' }).catch((error: unknown) => {
      this.logClient = null;
      throw error;
    });
    return this.logClient;
  }

  byRole(role: Role): Member[] {
    return this.members.filter((m) => m.role === role);
  }

  receiverUrls(): string[] {
    return this.byRole('receiver').filter((m) => isRunning(m)).map((m) => m.proc.baseUrl);
  }

  /** Start one more process of this role (its own ADMIN_PORT), resolved once it listens or its stages started. */
  async start(role: Role, extraEnv: Record<string, string> = {}): Promise<Member> {
    const adminPort = await getFreePort();
    // Stage processes must log at info: startServiceProcess waits for their "ingress started" line. Receivers
    // print their address on stderr at any level; at info they would log one line per request.
    const env = { ...this.env, LOG_LEVEL: role === 'receiver' ? 'warn' : 'info', ...extraEnv, ADMIN_PORT: String(adminPort) };
    const proc = await startServiceProcess(env, ['--services', role], { upWithinMs: upWithin(role) });
    track(proc.child);
    const member: Member = { role, name: `${role}-${this.byRole(role).length + 1}`, adminPort, env, proc, frozen: false, starts: 1, previousOutputs: [] };
    this.members.push(member);
    return member;
  }

  /** A new process in place of the member's (same env, same admin port); the old one must have exited. */
  async restart(member: Member): Promise<Member> {
    if (isRunning(member)) throw new Error(`${member.name} (pid ${member.proc.child.pid}) still runs`);
    member.previousOutputs.push(member.proc.output());
    member.proc = await startServiceProcess(member.env, ['--services', member.role], { upWithinMs: upWithin(member.role) });
    track(member.proc.child);
    member.frozen = false;
    member.starts++;
    return member;
  }

  /** Send `signal` and wait for the process to exit (a frozen process is thawed first unless the signal is SIGKILL). */
  async kill(member: Member, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const { child } = member.proc;
    if (!isRunning(member)) return;
    if (member.frozen && signal !== 'SIGKILL') this.thaw(member);
    child.kill(signal);
    await waitForExit(child);
    member.frozen = false;
  }

  freeze(member: Member): void {
    process.kill(member.proc.child.pid!, 'SIGSTOP');
    member.frozen = true;
  }

  thaw(member: Member): void {
    if (!member.frozen) return;
    if (isRunning(member)) process.kill(member.proc.child.pid!, 'SIGCONT');
    member.frozen = false;
  }

  async readyz(member: Member): Promise<{ status: number; body: unknown }> {
    const res = await fetch(`http://127.0.0.1:${member.adminPort}/readyz`, { signal: AbortSignal.timeout(5_000) });
    return { status: res.status, body: await res.json().catch(() => null) };
  }

  /** Wait until every running member's /readyz answers 200; fails naming those that do not, with their reasons. */
  async waitReady(patienceMs = 60_000, members: Member[] = this.members.filter(isRunning)): Promise<void> {
    await until(`/readyz 200 from ${members.map((m) => m.name).join(', ')}`, async () => {
      const answers = await Promise.all(members.map(async (m) => ({ name: m.name, ...(await this.readyz(m).catch((e) => ({ status: 0, body: String(e) }))) })));
      return answers.filter((a) => a.status !== 200);
    }, (notReady) => notReady.length === 0, patienceMs, 300);
  }

  /** Records of `group` not yet committed on `topic` (see KafkaEventLog.consumerLag). */
  async lag(stage: 'decoder' | 'dispatcher'): Promise<number> {
    const topic = stage === 'decoder' ? this.topics.received : this.topics.decoded;
    return (await this.log()).consumerLag(this.group(stage), topic);
  }

  /** Committed offsets of a stage's group, polled every `everyMs` (100 ms: a zombie's commit may be overtaken by the owner's next one within a few hundred ms); any partition whose offset goes down is recorded. */
  watchOffsets(stage: 'decoder' | 'dispatcher', everyMs = 100): OffsetWatch {
    const topic = stage === 'decoder' ? this.topics.received : this.topics.decoded;
    const watch = new OffsetWatch(() => this.admin(), this.group(stage), topic, everyMs);
    this.closers.push(() => watch.stop());
    return watch;
  }

  /**
   * Which client ids (one per process: the default KAFKA_CLIENT_ID names the pid, see clientIdOf) held which
   * partitions; for the mdn stage, those of its first input, the deliveries topic.
   */
  watchAssignments(stage: WatchedStage, everyMs = 500): AssignmentWatch {
    const topic = stage === 'decoder' ? this.topics.received : stage === 'dispatcher' ? this.topics.decoded : this.topics.mdnDeliveries;
    const watch = new AssignmentWatch(() => this.admin(), this.group(stage), topic, everyMs);
    this.closers.push(() => watch.stop());
    return watch;
  }

  /** Every ExecutionRequested on the default execution queue, read (read_committed) in the background. */
  async watchExecutions(): Promise<ExecutionWatch> {
    const watch = new ExecutionWatch(await this.log(), this.topics.executions);
    this.closers.push(() => watch.stop());
    return watch;
  }

  /** Thaw every frozen process, SIGTERM all, SIGKILL whatever has not exited after `graceMs`; close the clients. */
  async close(graceMs = 15_000): Promise<void> {
    for (const close of this.closers.splice(0)) await Promise.resolve(close()).catch(() => undefined);
    const running = this.members.filter(isRunning);
    for (const m of running) {
      try {
        if (m.frozen) process.kill(m.proc.child.pid!, 'SIGCONT');
        m.frozen = false;
        m.proc.child.kill('SIGTERM');
      } catch { /* gone */ }
    }
    await Promise.all(running.map(async (m) => {
      const exited = waitForExit(m.proc.child);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((r) => { timer = setTimeout(() => r(false), graceMs); });
      const inTime = await Promise.race([exited.then(() => true), late]);
      clearTimeout(timer);
      if (!inTime) {
        m.proc.child.kill('SIGKILL');
        await exited;
      }
    }));
    await this.logClient?.then((log) => log.close()).catch(() => undefined);
    this.logClient = null;
    await this.adminClient?.then((admin) => admin.disconnect()).catch(() => undefined);
    this.adminClient = null;
  }

  /** Output of every member process (the current one of a restarted member, and what its predecessors wrote). */
  outputs(chars = Infinity): string {
    return this.members.map((m) => `--- ${m.name} (pid ${m.proc.child.pid}, start ${m.starts})\n${[...m.previousOutputs, m.proc.output()].join('\n--- (restarted)\n').slice(-chars)}`).join('\n');
  }

  /** Everything the processes wrote, in a file under the temp dir (named in the test's notes). */
  saveOutputs(name: string): string {
    const file = path.join(tmpdir(), `${name}-${Date.now()}.log`);
    writeFileSync(file, this.outputs());
    return file;
  }
}

/** The Kafka client id of a member's process: the default KAFKA_CLIENT_ID (config.ts), as AssignmentWatch reports it. */
export function clientIdOf(member: Member): string {
  return member.env.KAFKA_CLIENT_ID ?? `ingress-${hostname()}-${member.proc.child.pid}`;
}

export function isRunning(member: Member): boolean {
  return member.proc.child.exitCode === null && member.proc.child.signalCode === null;
}

export interface OffsetRegression { partition: number; from: string; to: string; at: string }

/**
 * A stage group's committed offsets, read **stable** as the stages read them (stable-offset-fetch.ts), every
 * `everyMs`: any partition whose offset goes down is recorded. A partition whose offset is not stable yet (a
 * transaction that commits it has no markers yet) is skipped that round.
 *
 * Plain reads are not used: they answer from what the coordinator holds as committed, and can be behind an
 * acknowledged transactional commit (its markers are written after EndTxn is answered, and a coordinator that
 * just took over serves them from its high watermark). One read 46 and then 38 while a broker restarted, with no
 * record executed twice (docs/kafka.md, "Reading committed offsets").
 */
export class OffsetWatch {
  /** The latest observation per partition: a regression is recorded once, when the offset drops, not at every poll it stays low. */
  private readonly latest = new Map<number, bigint>();
  readonly regressions: OffsetRegression[] = [];
  polls = 0;
  private running = true;
  private readonly loop: Promise<void>;

  constructor(private readonly admin: () => Promise<Admin>, readonly group: string, readonly topic: string, everyMs: number) {
    useStableOffsetFetch();
    this.loop = (async () => {
      while (this.running) {
        await this.poll().catch(() => undefined); // a broker restart or a rebalance: try again next round
        await sleep(everyMs);
      }
    })();
  }

  /** The group's committed offsets now, stable (-1 where none; partitions not stable yet left out). */
  async current(): Promise<Map<number, bigint>> {
    const read = await stableCommittedOffsets(await this.admin(), this.group, this.topic);
    return new Map([...read].flatMap(([partition, offset]) => (offset === null ? [] : [[partition, BigInt(offset)] as const])));
  }

  private async poll(): Promise<void> {
    const now = await this.current();
    this.polls++;
    for (const [partition, offset] of now) {
      if (offset < 0n) continue;
      const before = this.latest.get(partition);
      if (before !== undefined && offset < before) {
        this.regressions.push({ partition, from: before.toString(), to: offset.toString(), at: new Date().toISOString() });
      }
      this.latest.set(partition, offset);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

export class AssignmentWatch {
  /** partition → client ids that held it at some poll. */
  readonly holders = new Map<number, Set<string>>();
  /** partition → the client id that held it at the latest poll that found the group stable with assignments. */
  current = new Map<number, string>();
  private running = true;
  private readonly loop: Promise<void>;

  constructor(private readonly admin: () => Promise<Admin>, readonly group: string, readonly topic: string, everyMs: number) {
    this.loop = (async () => {
      while (this.running) {
        await this.poll().catch(() => undefined);
        await sleep(everyMs);
      }
    })();
  }

  private async poll(): Promise<void> {
    const { groups } = await (await this.admin()).describeGroups([this.group]);
    const now = new Map<number, string>();
    for (const member of groups[0]?.members ?? []) {
      if (!member.memberAssignment || member.memberAssignment.length === 0) continue;
      const assignment = AssignerProtocol.MemberAssignment.decode(member.memberAssignment);
      for (const partition of assignment?.assignment[this.topic] ?? []) {
        let set = this.holders.get(partition);
        if (!set) this.holders.set(partition, (set = new Set()));
        set.add(member.clientId);
        now.set(partition, member.clientId);
      }
    }
    if (groups[0]?.state === 'Stable' && now.size > 0) this.current = now;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

const placed = (record: LogRecord) => `${record.partition}:${record.offset}@${new Date(record.timestamp).toISOString()}`;

/**
 * Where each of `requestIds` is in every topic of the pipeline (read_committed, from the beginning), the execution
 * queue read again too: a request received twice points at the receiver, decoded twice at the decoder, decoded once
 * but executed twice at the dispatcher; a missing one shows the last topic it reached, or that the watch missed it.
 */
export async function requestsTraced(cluster: PipelineCluster, executions: ExecutionWatch, requestIds: string[]): Promise<Record<string, unknown>[]> {
  if (requestIds.length === 0) return [];
  const log = await cluster.log();
  const codec = defaultAvroCodec();
  const find = async (topic: string, schema: 'Received' | 'Decoded' | 'ExecutionRequested') => {
    const found = new Map<string, string[]>();
    for (const record of await collectUntilQuiet(log, topic, 2_000)) {
      const { requestId } = codec.decode(schema, record.value) as { requestId: string };
      if (requestIds.includes(requestId)) found.set(requestId, [...found.get(requestId) ?? [], placed(record)]);
    }
    return found;
  };
  const received = await find(cluster.topics.received, 'Received');
  const decoded = await find(cluster.topics.decoded, 'Decoded');
  const executed = await find(cluster.topics.executions, 'ExecutionRequested');
  return requestIds.map((id) => ({ requestId: id, received: received.get(id) ?? [], decoded: decoded.get(id) ?? [], executions: executions.where.get(id) ?? [], executionsReadAgain: executed.get(id) ?? [] }));
}

/** requestsTraced for the first `max` doubled requests, for the note of a failing scenario. */
export function doublesTraced(cluster: PipelineCluster, executions: ExecutionWatch, max = 10): Promise<Record<string, unknown>[]> {
  return requestsTraced(cluster, executions, [...executions.perRequest].filter(([, n]) => n > 1).slice(0, max).map(([id]) => id));
}

/** The execution queue read from the beginning in the background; records deduplicated by position (a re-read after a reader error counts nothing twice). */
export class ExecutionWatch {
  /** requestId → executions seen for it. */
  readonly perRequest = new Map<string, number>();
  readonly executionIds = new Map<string, number>();
  /** requestId → where each of its executions is ("partition:offset@ISO time"), for telling a double's cause. */
  readonly where = new Map<string, string[]>();
  /** When the latest new record was seen (epoch ms). */
  lastRecordAt = Date.now();
  readErrors = 0;
  private readonly positions = new Set<string>();
  private readonly abort = new AbortController();
  private readonly loop: Promise<void>;
  private readonly codec = defaultAvroCodec();

  constructor(private readonly log: KafkaEventLog, readonly topic: string) {
    this.loop = (async () => {
      while (!this.abort.signal.aborted) {
        try {
          for await (const record of this.log.read(this.topic, { start: { from: 'beginning' }, signal: this.abort.signal })) {
            const position = `${record.partition}:${record.offset}`;
            if (this.positions.has(position)) continue;
            this.positions.add(position);
            const execution = this.codec.decode('ExecutionRequested', record.value);
            this.perRequest.set(execution.requestId, (this.perRequest.get(execution.requestId) ?? 0) + 1);
            this.executionIds.set(execution.executionId, (this.executionIds.get(execution.executionId) ?? 0) + 1);
            this.where.set(execution.requestId, [...this.where.get(execution.requestId) ?? [], placed(record)]);
            this.lastRecordAt = Date.now();
          }
        } catch {
          this.readErrors++; // e.g. the broker restarted under the reader: read again, known positions are skipped
        }
        if (!this.abort.signal.aborted) await sleep(1_000);
      }
    })();
  }

  get records(): number {
    return this.positions.size;
  }

  /** The request ids of `accepted` with no execution seen yet. */
  missing(accepted: readonly string[]): string[] {
    return accepted.filter((id) => !this.perRequest.has(id));
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }
}

export interface LoadOptions {
  /** Where to POST, read before each request (so a restarted receiver's new address is used). */
  urls: () => string[];
  workflowIds: string[];
  /** Requests started per second, all workers together. */
  ratePerSecond: number;
  concurrency: number;
  /** The loop ends after this many requests, or at stop(). */
  max: number;
  /** The `i`th request, when not the default JSON webhook call to workflowIds[i % n] (e.g. an AS2 message). */
  request?: (i: number) => { workflowId: string; headers: Record<string, string>; body: string };
}

export interface LoadResult {
  /** Request ids answered 200, in answer order. */
  accepted: string[];
  /** Answers other than 200 (with their request id: a refused accept may still have reached the log). */
  refused: { status: number; requestId: string | null }[];
  /** Requests that got no answer at all. */
  failed: number;
}

export interface Load extends LoadResult {
  /** Ends the loop and waits for the requests in flight. */
  stop(): Promise<LoadResult>;
  done: Promise<LoadResult>;
}

/** A bounded, paced loop of POSTs to /hook/{workflowId}, round-robin over receivers and workflows. */
export function startLoad(options: LoadOptions): Load {
  const load = { accepted: [] as string[], refused: [] as LoadResult['refused'], failed: 0 };
  let stopped = false;
  let next = 0;
  const t0 = Date.now();
  const interval = 1000 / options.ratePerSecond;
  const worker = async (w: number) => {
    for (;;) {
      const i = next++;
      if (stopped || i >= options.max) return;
      const due = t0 + i * interval;
      if (due > Date.now()) await sleep(due - Date.now());
      if (stopped) return;
      const urls = options.urls();
      const request = options.request?.(i) ?? { workflowId: options.workflowIds[i % options.workflowIds.length], headers: { 'content-type': 'application/json' }, body: JSON.stringify({ w, i }) };
      const url = `${urls[i % urls.length]}/hook/${request.workflowId}`;
      try {
        const res = await fetch(url, { method: 'POST', headers: request.headers, body: request.body, signal: AbortSignal.timeout(30_000) });
        await res.arrayBuffer();
        if (res.status === 200) load.accepted.push(res.headers.get('x-request-id')!);
        else load.refused.push({ status: res.status, requestId: res.headers.get('x-request-id') });
      } catch {
        load.failed++;
      }
    }
  };
  const done = Promise.all(Array.from({ length: options.concurrency }, (_, w) => worker(w))).then(() => load);
  return Object.assign(load, {
    done,
    stop: async () => { stopped = true; return done; },
  });
}

export interface ExactlyOnceReport {
  accepted: number;
  executions: number;
  /** Executions beyond the first of a request id (0 when exactly once). */
  doubles: number;
  /** Request ids with more than one execution. */
  doubledRequests: number;
  /** Executions whose execution id appears more than once. */
  doubledExecutionIds: number;
  /** Accepted (200) request ids without an execution. */
  missing: number;
  /** Executions of request ids this test never got an answer with. */
  unknown: number;
}

/** What the execution queue holds against what the load was answered. */
export function exactlyOnce(load: LoadResult, executions: ExecutionWatch): ExactlyOnceReport {
  const answered = new Set([...load.accepted, ...load.refused.map((r) => r.requestId).filter((id): id is string => id !== null)]);
  let doubles = 0;
  let doubledRequests = 0;
  let unknown = 0;
  for (const [requestId, n] of executions.perRequest) {
    if (n > 1) { doubles += n - 1; doubledRequests++; }
    if (!answered.has(requestId)) unknown += n;
  }
  return {
    accepted: load.accepted.length,
    executions: executions.records,
    doubles,
    doubledRequests,
    doubledExecutionIds: [...executions.executionIds.values()].filter((n) => n > 1).length,
    missing: executions.missing(load.accepted).length,
    unknown,
  };
}

/**
 * Wait until the pipeline has drained: every accepted request has an execution, the decoder group has committed
 * everything received, and no new execution came for `quietMs` (so doubles still on their way are counted).
 */
export async function drain(cluster: PipelineCluster, load: LoadResult, executions: ExecutionWatch, { quietMs = 5_000, patienceMs = 120_000 } = {}): Promise<void> {
  try {
    await drained(cluster, load, executions, quietMs, patienceMs);
  } catch (error) {
    // A stage that stopped making progress says why in its own lines (fencing, retries, offset reads); a request
    // that is missing, by the last topic it reached.
    const missing = executions.missing(load.accepted).slice(0, 10);
    const traced = await requestsTraced(cluster, executions, missing).then((t) => JSON.stringify(t), (e: unknown) => `not read: ${String(e)}`);
    throw new Error(`${(error as Error).message}; missing requests traced through the topics: ${traced}; every process's output: ${cluster.saveOutputs('pipeline-drain-gave-up')}`, { cause: error });
  }
}

async function drained(cluster: PipelineCluster, load: LoadResult, executions: ExecutionWatch, quietMs: number, patienceMs: number): Promise<void> {
  await until('the pipeline to drain (every 200 executed, decoder lag 0, execution queue quiet)', async () => {
    const missing = executions.missing(load.accepted).length;
    const decoderLag = await cluster.lag('decoder').catch(() => -1);
    const dispatcherLag = await cluster.lag('dispatcher').catch(() => -1);
    return { missing, decoderLag, dispatcherLag, quietForMs: Date.now() - executions.lastRecordAt, executions: executions.records };
  }, (s) => s.missing === 0 && s.decoderLag === 0 && s.quietForMs >= quietMs, patienceMs, 500);
}
