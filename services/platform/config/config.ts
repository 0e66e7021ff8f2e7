import { hostname } from 'node:os';
import * as path from 'node:path';
import { APPEND_TIMEOUT_MS } from '../log/event-log';
import { TOPIC_NAMES } from '../log/topics';
import type { RecordKeyMode } from '../log/record-keys';
import { adminSettings, listenHostProblem, type AdminSettings } from './admin-settings';
import { baseUrlProblem, shownUrl } from './url-values';
import { listenUrl } from '../net/listen-url';

/** REPLAY_LANDING_WINDOW_MS's default: why a minute is in refeed.ts (LANDING_WINDOW_MS). */
export const DEFAULT_REPLAY_LANDING_WINDOW_MS = 60_000;

/**
 * The service's configuration, read once from the environment (DESIGN.md §3). Every bad or
 * contradictory value is reported, each on one line naming the variable and what it accepts; nothing
 * falls back silently.
 */
export type TriggerKindName = 'webhook' | 'as2' | 'logistics' | 'warehouse';
export const TRIGGER_KINDS: readonly TriggerKindName[] = ['webhook', 'as2', 'logistics', 'warehouse'];

export interface Config extends AdminSettings {
  port: number;
  host: string;
  dataDir: string;
  /** PUBLIC_BASE_URL; null when unset: hook URLs are then made from where the receiver listens (hookBaseUrl). */
  publicBaseUrl: string | null;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  kafka: KafkaSettings | null;
  /**
   * What the pipeline's records are keyed by, and so what stays in order on one partition: every event of a
   * workflow ('workflow': one busy workflow is handled by one decoder and one dispatcher at a time), or each
   * request on its own ('request': a busy workflow spreads over every partition; no order between requests).
   */
  recordKey: RecordKeyMode;
  blob: { connectionString: string; container: string } | null;
  cosmos: { endpoint: string; key: string; database: string; caFile: string | null } | null;
  encryptionKey: string | null;
  /** INGRESS_ENCRYPTION_KEY_PREVIOUS: the key a rotation replaced, for opening only (credential-crypto.ts). */
  previousEncryptionKey: string | null;
  maxBodyBytes: number;
  inlineBodyMax: number;
  workflowCacheMs: number;
  /** How long a request body may send nothing before the receiver gives it up (408). */
  bodyIdleMs: number;
  /** The slowest a request body may arrive on average, after a grace period, before it is given up (408); 0: no minimum. */
  bodyMinBytesPerSecond: number;
  /** Bounds of the webhook's decoding (SPEC §8 leaves them to us). */
  maxInflatedBytes: number;
  /** MAX_INFLATION_RATIO: past its first MiB, a webhook body may inflate to at most this many times its compressed size. */
  maxInflationRatio: number;
  /** What request bodies may hold in memory while they arrive, all together: the receiver's and those of the triggers that keep whole bodies. */
  maxHeldBodyBytes: number;
  /** Certificates of credentials with fewer days than this left are logged as a warning once a day (0: only expired ones, as errors). */
  certExpiryWarningDays: number;
  /** AS2: accept MD5 as a signature digest and MDN micalg, for a partner that cannot do better (off by default). */
  as2AllowMd5: boolean;
  multipart: { maxFileBytes: number; maxFiles: number; maxFields: number };
  /** The most `name=value` pairs one URL-encoded form may carry (a name sent twice counts twice). */
  maxFormFields: number;
  /** How many samples of trigger output are kept per trigger node. */
  sampleDataKeep: number;
  /** Query parameter names (lower case) whose values are redacted in received records, beyond the built-in ones. */
  redactQueryParams: ReadonlySet<string>;
  /** Topic for each trigger kind's execution requests. */
  executionQueues: Record<TriggerKindName, string>;
  /** Prepended to every topic and consumer group name. */
  topicPrefix: string;
  /** Admin HTTP port for /healthz and /readyz; null = off (ADMIN_PORT=0). */
  adminPort: number | null;
  /** How long SIGTERM may take: in-flight requests, stage commits, closing the backends. */
  shutdownGraceMs: number;
  /** Back-pressure: accepts waiting for the log beyond these are answered 503 at once. */
  maxPendingAccepts: number;
  maxPendingAcceptBytes: number;
  /**
   * STAGE_THREADS: 1 runs the stages beside a receiver in one worker thread, off the receiver's event loop;
   * 0 runs them on the main thread as before.
   */
  stageThreads: 0 | 1;
  /** STAGE_WATCHDOG_MS: how long the stage worker thread may leave a ping unanswered before it is taken for hung. */
  stageWatchdogMs: number;
  /** REPLAY_LEDGER_MAX_ORIGINALS: how many replayed originals the dead-letter replay ledger keeps (replay-ledger.ts). */
  replayLedgerMaxOriginals: number;
  /** REPLAY_LANDING_WINDOW_MS: how long after a died run's announced batch a rerun on Kafka looks for its copies (refeed.ts). */
  replayLandingWindowMs: number;
  /**
   * The longest idempotency window a node may use, in hours: how far back the decoder reads a partition of the
   * received topic to recover the keys it has seen (services/decoder/idempotency-ledger.ts).
   */
  idempotencyMaxWindowHours: number;
  /** What `ingress topics apply` creates on Kafka (docs/records-and-topics.md, "Topics"). */
  topicSettings: TopicSettings;
  /** AS2 asynchronous MDNs (docs/as2-async-mdn.md): how long delivery is retried, and the delay of each retry topic. */
  as2MdnRetry: As2MdnRetrySettings;
  /** The request journal (docs/request-journal.md). */
  journal: JournalSettings;
}

export interface JournalSettings {
  /** JOURNAL_RETENTION_DAYS: how long an entry is kept (Cosmos TTL; the file registry prunes whole days). */
  retentionDays: number;
  /** JOURNAL_REFUSED_PER_MINUTE: refused requests journaled per workflow and minute (a burst of as many), 0 for none. */
  refusedPerMinute: number;
  /** JOURNAL_TRACE_URL: a link to a trace, `{traceId}` replaced (e.g. a Jaeger UI's /trace/{traceId}); null for none. */
  traceUrl: string | null;
}

export interface As2MdnRetrySettings {
  /** From the message's accept: no attempt is scheduled after this long (AS2_MDN_RETRY_HOURS). */
  windowMs: number;
  /** The delay before the 1st, 2nd and 3rd-and-later retries (AS2_MDN_RETRY_DELAYS), ascending. */
  delaysMs: [number, number, number];
  /**
   * From the received record's append: the first attempt is not due before this (AS2_MDN_FIRST_ATTEMPT_DELAY).
   * An append reported failed may still reach the log; by then the receiver has answered, and kept, a failure
   * MDN, which the stage must find before it sends the processed one (docs/as2-async-mdn.md).
   */
  firstAttemptDelayMs: number;
}

/** What the receiver needs, after an append reported failed, to sign and keep its failure MDN (and clock skew). */
export const MDN_FAILURE_EVIDENCE_MARGIN_MS = 15_000;

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `30s,5m,30m`: three ascending durations (ms, s, m or h), each from 10 ms to 24 h; or why not. */
export function parseRetryDelays(raw: string): [number, number, number] | string {
  const parts = raw.split(',').map((p) => p.trim());
  if (parts.length !== 3) return `three comma-separated durations (one per retry topic), e.g. 30s,5m,30m; got ${parts.length}`;
  const delays = parts.map((p) => { const m = DURATION.exec(p); return m ? Number(m[1]) * DURATION_MS[m[2]] : NaN; });
  const bad = parts.filter((_, i) => !(delays[i] >= 10 && delays[i] <= 86_400_000));
  if (bad.length) return `each a duration from 10ms to 24h with a unit (ms, s, m, h), e.g. 30s,5m,30m; bad: ${bad.join(', ')}`;
  if (delays[0] > delays[1] || delays[1] > delays[2]) return 'durations in ascending order (the first retry comes soonest)';
  // Whole milliseconds: a retry's due time is an Avro long (`10.5ms` made every retry record fail to encode).
  return delays.map(Math.round) as [number, number, number];
}

export type { RecordKeyMode };

export interface KafkaSettings {
  brokers: string[];
  /** Names this process to the brokers (logs, quotas); not part of any transactional id. */
  clientId: string;
  /** A stage member that sends no heartbeat for this long is expelled and its partitions reassigned. */
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  /** How long the first append of an idle producer waits for others to share its produce request (coalescing-producer.ts). */
  lingerMs: number;
}

export interface TopicSettings {
  partitions: number;
  /** Capped to the cluster's broker count when applied, with a warning. */
  replicationFactor: number;
  minInsyncReplicas: number;
  /** Hours; 0 keeps records forever. */
  retentionHours: number;
  deadLetterRetentionHours: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }

  /** One that crossed from a worker thread as its name and message only (threads/rpc.ts), given its class back. */
  static revived(message: string): ConfigError {
    return new ConfigError(message.split('\n').slice(1).map((line) => line.replace(/^ {2}/, '')));
  }
}

/**
 * The base of the hook URLs (`<base>/hook/{id}`): PUBLIC_BASE_URL, else the receiver's own address with the
 * port it listens on, `listeningPort` (with PORT=0 the configuration knows no port: the OS picks one at
 * listen). Null when no port is known: PORT=0 and no receiver listening in this process (the CLI on its own).
 */
export function hookBaseUrl(config: Pick<Config, 'publicBaseUrl' | 'host' | 'port'>, listeningPort: number | null): string | null {
  if (config.publicBaseUrl !== null) return config.publicBaseUrl;
  const port = listeningPort ?? config.port;
  return port === 0 ? null : listenUrl(config.host, port);
}

const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;
const SIZE = /^(\d+)\s*(B|KiB|MiB|GiB)?$/i;
const UNITS: Record<string, number> = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 };

/**
 * The OpenTelemetry variables the SDK (telemetry/sdk.ts) reads to choose its exporters: it takes a value it does not
 * know with a diagnostic warning nobody sees, and runs without that exporter, or, for `none` beside another, with
 * the default; a value other than true/false for OTEL_SDK_DISABLED it takes as false. Refused here like any other.
 */
const OTEL_EXPORTERS: Record<string, readonly string[]> = {
  OTEL_TRACES_EXPORTER: ['otlp', 'zipkin', 'console', 'none'],
  OTEL_METRICS_EXPORTER: ['otlp', 'prometheus', 'console', 'none'],
};
function telemetryProblems(get: (name: string) => string | undefined): string[] {
  const problems: string[] = [];
  for (const [name, known] of Object.entries(OTEL_EXPORTERS)) {
    const raw = get(name);
    if (raw === undefined) continue;
    const values = raw.split(',').map((v) => v.trim()).filter((v) => v !== '');
    const unknown = values.filter((v) => !known.includes(v));
    if (unknown.length) problems.push(`${name}=${JSON.stringify(raw)}: ${unknown.map((v) => JSON.stringify(v)).join(', ')} is no exporter the SDK has (${known.join(', ')}, comma-separated)`);
    else if (values.includes('none') && values.length > 1) problems.push(`${name}=${JSON.stringify(raw)}: none means no exporter, and cannot stand beside another`);
  }
  const disabled = get('OTEL_SDK_DISABLED');
  if (disabled !== undefined && !/^(true|false)$/i.test(disabled)) problems.push(`OTEL_SDK_DISABLED=${JSON.stringify(disabled)}: true or false`);
  return problems;
}

export function loadConfig(env: NodeJS.ProcessEnv): Config {
  const problems: string[] = [];
  const get = (name: string) => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const integer = (name: string, fallback: number, min: number, max: number, what: string) => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) { problems.push(`${name}=${JSON.stringify(raw)}: ${what} (a whole number from ${min} to ${max})`); return fallback; }
    return n;
  };
  const size = (name: string, fallback: number, min: number, max: number) => {
    const raw = get(name);
    if (raw === undefined) return fallback;
    const m = SIZE.exec(raw);
    const n = m ? Number(m[1]) * UNITS[(m[2] ?? 'b').toLowerCase()] : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) { problems.push(`${name}=${JSON.stringify(raw)}: a size in bytes, optionally with KiB, MiB or GiB, from ${min} to ${max} bytes`); return fallback; }
    return n;
  };

  const port = integer('PORT', 8080, 0, 65535, 'the HTTP port');
  const host = get('HOST') ?? '0.0.0.0';
  const hostProblem = listenHostProblem('HOST', host, '0.0.0.0 (the default) or 127.0.0.1');
  if (hostProblem) problems.push(hostProblem);
  const dataDir = path.resolve(get('DATA_DIR') ?? './data');

  let publicBaseUrl: string | null = null;
  const base = get('PUBLIC_BASE_URL');
  if (base !== undefined) {
    const problem = baseUrlProblem('PUBLIC_BASE_URL', base, 'an absolute http:// or https:// URL, e.g. https://hooks.example.com');
    if (problem) problems.push(problem);
    else publicBaseUrl = base.replace(/\/+$/, '');
  }

  const level = (get('LOG_LEVEL') ?? 'info').toLowerCase();
  if (!['debug', 'info', 'warn', 'error'].includes(level)) problems.push(`LOG_LEVEL=${JSON.stringify(level)}: one of debug, info, warn, error`);

  let kafka: Config['kafka'] = null;
  const brokers = get('KAFKA_BROKERS');
  if (brokers !== undefined) {
    const list = brokers.split(',').map((b) => b.trim()).filter(Boolean);
    const bad = list.filter((b) => !/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(b) || Number(b.slice(b.lastIndexOf(':') + 1)) > 65535);
    if (list.length === 0 || bad.length) problems.push(`KAFKA_BROKERS=${JSON.stringify(brokers)}: a comma-separated list of host:port (bad: ${bad.join(', ') || 'empty'})`);
    // Transactional ids derive from group, topic and partition (transactional-stage.ts), not from this:
    // several processes on one host may share a client id; the pid tells them apart in the brokers' logs.
    else kafka = { brokers: list, clientId: get('KAFKA_CLIENT_ID') ?? `ingress-${hostname()}-${process.pid}`, sessionTimeoutMs: 0, heartbeatIntervalMs: 0, lingerMs: 0 };
  }
  // Kafka's brokers refuse sessions outside group.min/max.session.timeout.ms (6 s and 30 min by default).
  const sessionTimeoutMs = integer('KAFKA_SESSION_TIMEOUT_MS', 6_000, 1_000, 1_800_000, 'how long a silent stage member keeps its partitions, in milliseconds');
  const heartbeatIntervalMs = integer('KAFKA_HEARTBEAT_INTERVAL_MS', 1_000, 100, 600_000, 'how often a stage member sends a heartbeat, in milliseconds');
  if (heartbeatIntervalMs * 3 > sessionTimeoutMs) {
    problems.push(`KAFKA_HEARTBEAT_INTERVAL_MS=${heartbeatIntervalMs}: at most a third of KAFKA_SESSION_TIMEOUT_MS (${sessionTimeoutMs}), or one late heartbeat expels the member`);
  }
  const lingerMs = integer('KAFKA_LINGER_MS', 0, 0, 1_000, 'how long an append waits for others to share its produce request when none is in flight, in milliseconds');
  if (kafka) Object.assign(kafka, { sessionTimeoutMs, heartbeatIntervalMs, lingerMs });
  const recordKeyRaw = (get('RECORD_KEY') ?? 'workflow').toLowerCase();
  if (recordKeyRaw !== 'workflow' && recordKeyRaw !== 'request') problems.push(`RECORD_KEY=${JSON.stringify(get('RECORD_KEY'))}: workflow (per-workflow order) or request (spread over every partition)`);
  const recordKey: RecordKeyMode = recordKeyRaw === 'request' ? 'request' : 'workflow';

  let blob: Config['blob'] = null;
  const conn = get('AZURE_STORAGE_CONNECTION_STRING');
  const container = get('BLOB_CONTAINER') ?? 'ingress';
  if (!/^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/.test(container)) problems.push(`BLOB_CONTAINER=${JSON.stringify(container)}: 3-63 lower-case letters, digits and single hyphens, as Azure container names require`);
  if (conn !== undefined) {
    // Do not echo the connection string: it holds the account key.
    if (!/AccountName=|BlobEndpoint=|UseDevelopmentStorage=true/i.test(conn)) problems.push('AZURE_STORAGE_CONNECTION_STRING: an Azure Storage connection string (with AccountName/AccountKey or BlobEndpoint); the value given is not one');
    else blob = { connectionString: conn, container };
  } else if (get('BLOB_CONTAINER') !== undefined) {
    problems.push('BLOB_CONTAINER is set but AZURE_STORAGE_CONNECTION_STRING is not: set both to use Azure Blob Storage, or neither for the filesystem store');
  }

  let cosmos: Config['cosmos'] = null;
  const endpoint = get('COSMOS_ENDPOINT');
  const key = get('COSMOS_KEY');
  if ((endpoint === undefined) !== (key === undefined)) {
    problems.push(`${endpoint === undefined ? 'COSMOS_KEY' : 'COSMOS_ENDPOINT'} is set without ${endpoint === undefined ? 'COSMOS_ENDPOINT' : 'COSMOS_KEY'}: set both to use Cosmos DB, or neither for the file registry`);
  } else if (endpoint !== undefined && key !== undefined) {
    let ok = true;
    try { const u = new URL(endpoint); ok = u.protocol === 'https:' || u.protocol === 'http:'; } catch { ok = false; }
    // Not echoed: a connection string pasted here by mistake carries the account key.
    if (!ok) problems.push('COSMOS_ENDPOINT is not an http:// or https:// URL: set the account URL, e.g. https://myaccount.documents.azure.com:443/ (the key goes in COSMOS_KEY)');
    const database = get('COSMOS_DATABASE') ?? 'ingress';
    if (!/^[^/\\#?]{1,255}$/.test(database)) problems.push(`COSMOS_DATABASE=${JSON.stringify(database)}: 1-255 characters without / \\ # ?`);
    if (ok) cosmos = { endpoint, key, database, caFile: get('COSMOS_CA_FILE') ?? null };
  }

  if (cosmos === null && endpoint === undefined && key === undefined && get('COSMOS_CA_FILE') !== undefined) {
    problems.push('COSMOS_CA_FILE is set but COSMOS_ENDPOINT and COSMOS_KEY are not: it is for a Cosmos DB registry; set them too, or unset it for the file registry');
  }
  problems.push(...telemetryProblems(get));

  const encryptionKey = get('INGRESS_ENCRYPTION_KEY') ?? null;
  if (encryptionKey !== null && encryptionKey.length < 16) problems.push('INGRESS_ENCRYPTION_KEY: at least 16 characters (a random string; keep it secret and stable)');
  // The key a rotation replaced, to open what it sealed until `ingress credentials reseal` has run. Its value is never quoted.
  const previousEncryptionKey = get('INGRESS_ENCRYPTION_KEY_PREVIOUS') ?? null;
  if (previousEncryptionKey !== null) {
    if (encryptionKey === null) problems.push('INGRESS_ENCRYPTION_KEY_PREVIOUS is set but INGRESS_ENCRYPTION_KEY is not: the previous key only opens credentials while a new key seals them; set INGRESS_ENCRYPTION_KEY to the new key');
    else if (previousEncryptionKey === encryptionKey) problems.push('INGRESS_ENCRYPTION_KEY_PREVIOUS is the same as INGRESS_ENCRYPTION_KEY: set it to the key being replaced, or unset it');
    if (previousEncryptionKey.length < 16) problems.push('INGRESS_ENCRYPTION_KEY_PREVIOUS: at least 16 characters, as INGRESS_ENCRYPTION_KEY');
  }

  const maxBodyBytes = size('MAX_BODY_BYTES', 64 * 1024 ** 2, 1024, 16 * 1024 ** 3);
  // A received record must also fit a topic created outside `ingress topics apply` (Kafka's default
  // max.message.bytes, 1 MB) with its headers; larger bodies travel as claim checks anyway.
  const inlineBodyMax = size('INLINE_BODY_MAX', 256 * 1024, 0, 768 * 1024);
  const maxInflatedBytes = size('MAX_INFLATED_BYTES', 256 * 1024 ** 2, 1024, 16 * 1024 ** 3);
  // deflate cannot inflate to more than about 1032 times its size: 1032 leaves only MAX_INFLATED_BYTES.
  const maxInflationRatio = integer('MAX_INFLATION_RATIO', 100, 2, 1032, 'how many times its compressed size a webhook body may inflate to, past its first MiB (1032, deflate\'s most, turns the ratio off)');
  const maxHeldBodyBytes = size('MAX_HELD_BODY_BYTES', 256 * 1024 ** 2, 1024 ** 2, 64 * 1024 ** 3);
  // While it arrives, a body is held by the receiver (up to INLINE_BODY_MAX) and, for the triggers that keep
  // whole bodies, by its trigger too, both within this budget: a body alone must always fit, or its sender
  // would be told "busy" for ever. 64 KiB is the most one read of the socket adds at once.
  if (maxHeldBodyBytes < 2 * inlineBodyMax + 64 * 1024) {
    problems.push(`MAX_HELD_BODY_BYTES=${maxHeldBodyBytes}: at least twice INLINE_BODY_MAX (${inlineBodyMax}) plus 64KiB, so that one body alone always fits`);
  }
  const allowMd5 = get('AS2_ALLOW_MD5')?.toLowerCase() ?? 'false';
  if (allowMd5 !== 'true' && allowMd5 !== 'false') problems.push(`AS2_ALLOW_MD5=${JSON.stringify(get('AS2_ALLOW_MD5'))}: true or false`);
  const certExpiryWarningDays = integer('CERT_EXPIRY_WARNING_DAYS', 30, 0, 3650, 'how many days before a credential certificate expires the running service starts warning of it, once a day; 0 logs only expired certificates');
  const multipart = {
    maxFileBytes: size('MULTIPART_MAX_FILE_BYTES', maxBodyBytes, 1, 16 * 1024 ** 3),
    maxFiles: integer('MULTIPART_MAX_FILES', 100, 1, 10_000, 'how many files one multipart body may carry'),
    maxFields: integer('MULTIPART_MAX_FIELDS', 1000, 1, 100_000, 'how many text fields one multipart body may carry'),
  };
  const maxFormFields = integer('FORM_MAX_FIELDS', 10_000, 1, 100_000, 'how many name=value pairs one URL-encoded form may carry');
  const sampleDataKeep = integer('SAMPLE_DATA_KEEP', 5, 1, 100, 'how many samples of trigger output to keep per trigger node');
  const redactQueryParams = new Set((get('REDACT_QUERY_PARAMS') ?? '').split(',').map((n) => n.trim().toLowerCase()).filter(Boolean));
  const workflowCacheMs = integer('WORKFLOW_CACHE_MS', 2000, 0, 3_600_000, 'how long a workflow look-up is cached, in milliseconds');
  // At most the receiver's whole-request timeout (300 s), which would end such a request anyway.
  const bodyIdleMs = integer('BODY_IDLE_TIMEOUT_MS', 60_000, 100, 300_000, 'how long a request body may send nothing before it is given up, in milliseconds');
  const bodyMinBytesPerSecond = integer('BODY_MIN_BYTES_PER_SECOND', 240, 0, 1024 * 1024, 'the slowest a request body may arrive on average, in bytes per second (0: no minimum)');

  const topicPrefix = get('INGRESS_TOPIC_PREFIX') ?? '';
  if (topicPrefix && !/^[A-Za-z0-9._-]{1,100}$/.test(topicPrefix)) problems.push(`INGRESS_TOPIC_PREFIX=${JSON.stringify(topicPrefix)}: up to 100 letters, digits, ".", "_" or "-"`);
  const executionQueues = {} as Record<TriggerKindName, string>;
  for (const kind of TRIGGER_KINDS) {
    const name = `EXECUTION_QUEUE_${kind.toUpperCase()}`;
    const topic = get(name) ?? TOPIC_NAMES.executions;
    // Kafka's rule applies to the name with its prefix: at most 249 characters, and neither "." nor "..".
    if (!TOPIC.test(topic) || topic === '.' || topic === '..') problems.push(`${name}=${JSON.stringify(topic)}: a Kafka topic name (letters, digits, ".", "_", "-"; not "." or "..")`);
    else if (topicPrefix.length + topic.length > 249) problems.push(`${name}=${JSON.stringify(topic)}: with INGRESS_TOPIC_PREFIX (${topicPrefix.length} characters) longer than the 249 characters Kafka allows a topic name`);
    executionQueues[kind] = topicPrefix + topic;
  }
  // Kafka keeps "." and "_" apart in names but not in metrics, and refuses a topic that differs from another only
  // by them. And a queue that is a pipeline topic would have the dispatcher write executions into it.
  const collides = (name: string) => name.replace(/\./g, '_');
  const pipeline = new Map(Object.entries(TOPIC_NAMES).flatMap(([, t]) => (Array.isArray(t) ? t : [t])).filter((t) => t !== TOPIC_NAMES.executions).map((t) => [collides(topicPrefix + t), topicPrefix + t]));
  const byCollision = new Map<string, Set<string>>();
  for (const queue of Object.values(executionQueues)) byCollision.set(collides(queue), (byCollision.get(collides(queue)) ?? new Set()).add(queue));
  for (const kind of TRIGGER_KINDS) {
    const name = `EXECUTION_QUEUE_${kind.toUpperCase()}`;
    const queue = executionQueues[kind];
    if (get(name) === undefined) continue;
    const pipelineTopic = pipeline.get(collides(queue));
    const others = [...(byCollision.get(collides(queue)) ?? [])].filter((q) => q !== queue);
    if (pipelineTopic === queue) problems.push(`${name}=${JSON.stringify(get(name))}: is the pipeline topic ${pipelineTopic}; an execution queue needs a topic of its own`);
    else if (pipelineTopic !== undefined) problems.push(`${name}=${JSON.stringify(get(name))}: collides with the pipeline topic ${pipelineTopic} (Kafka refuses names that differ only by "." and "_")`);
    else if (others.length > 0) problems.push(`${name}=${JSON.stringify(get(name))}: collides with the execution queue ${others[0]} (Kafka refuses names that differ only by "." and "_")`);
  }
  for (const name of Object.keys(env)) {
    // Empty counts as unset here too (as for every variable).
    if (name.startsWith('EXECUTION_QUEUE_') && get(name) !== undefined && !TRIGGER_KINDS.includes(name.slice(16).toLowerCase() as TriggerKindName)) {
      problems.push(`${name}: unknown trigger kind; use one of ${TRIGGER_KINDS.map((k) => `EXECUTION_QUEUE_${k.toUpperCase()}`).join(', ')}`);
    }
  }

  const adminPortValue = integer('ADMIN_PORT', 8081, 0, 65535, 'the admin port of /healthz and /readyz, 0 for none');
  const adminPort = adminPortValue === 0 ? null : adminPortValue;
  if (adminPort !== null && adminPort === port) problems.push(`ADMIN_PORT=${adminPort}: must differ from PORT`);
  // ADMIN_HOST, ADMIN_TOKENS, ADMIN_URL/ADMIN_TOKEN: the management API (admin-settings.ts).
  const admin = adminSettings(get, problems);
  // At least a second: a stop always takes a few milliseconds, so 0 (which some tools read as "no limit") or a
  // few ms cut every shutdown and exited 1, the requests in flight with it.
  const shutdownGraceMs = integer('SHUTDOWN_GRACE_MS', 25_000, 1_000, 3_600_000, 'how long a graceful shutdown may take, in milliseconds');
  const maxPendingAccepts = integer('MAX_PENDING_ACCEPTS', 2_000, 1, 1_000_000, 'how many accepts may wait for the log before the receiver answers 503');
  const maxPendingAcceptBytes = size('MAX_PENDING_ACCEPT_BYTES', 64 * 1024 ** 2, 1024, 16 * 1024 ** 3);

  const stageThreads = integer('STAGE_THREADS', 1, 0, 1, 'worker threads for the stages beside a receiver: 1, or 0 to run them on the main thread') as 0 | 1;
  // Nothing is deleted from the embedded log's dead-letter topic, so its ledger never drops a claim: a backlog
  // larger than the default needs a larger ledger, never a forgetful one.
  const replayLedgerMaxOriginals = integer('REPLAY_LEDGER_MAX_ORIGINALS', 100_000, 1_000, 2_000_000, 'originals the dead-letter replay ledger keeps (some 150 bytes of memory each)');
  const replayLandingWindowMs = integer('REPLAY_LANDING_WINDOW_MS', DEFAULT_REPLAY_LANDING_WINDOW_MS, 1_000, 3_600_000, 'how long after a died replay run\'s announced batch a rerun on Kafka waits before it looks for the copies that landed, in milliseconds');
  const stageWatchdogMs = integer('STAGE_WATCHDOG_MS', 60_000, 1_000, 3_600_000, 'how long the stage worker thread may go without answering before it is terminated, in milliseconds');
  // Read by libuv, not by us (cli/thread-pool.ts sets 16 when it is unset), which turns anything it cannot use
  // into 1 thread or 1024 without a word: checked here so that a typo stops the start instead.
  integer('UV_THREADPOOL_SIZE', 16, 1, 1024, "libuv's thread pool (file system calls, MDN signatures)");

  const replicationFactor = integer('KAFKA_REPLICATION_FACTOR', 3, 1, 16, 'replicas of each pipeline topic');
  const topicSettings: TopicSettings = {
    partitions: integer('KAFKA_TOPIC_PARTITIONS', 6, 1, 10_000, 'partitions of each pipeline topic'),
    replicationFactor,
    // The default follows a lowered replication factor: 2 of 1 replica could never acknowledge an append.
    minInsyncReplicas: integer('KAFKA_MIN_INSYNC_REPLICAS', Math.min(2, replicationFactor), 1, 16, 'replicas that must acknowledge an append'),
    retentionHours: integer('KAFKA_RETENTION_HOURS', 168, 0, 876_000, 'hours the pipeline topics keep records, 0 for ever'),
    deadLetterRetentionHours: integer('KAFKA_DEAD_LETTER_RETENTION_HOURS', 720, 0, 876_000, 'hours the dead-letter topic keeps records, 0 for ever'),
  };
  // The default follows a shorter retention, as min.insync.replicas follows the replication factor.
  const idempotencyDefault = topicSettings.retentionHours > 0 ? Math.min(72, topicSettings.retentionHours) : 72;
  const idempotencyMaxWindowHours = integer('IDEMPOTENCY_MAX_WINDOW_HOURS', idempotencyDefault, 1, 8760, 'the longest idempotency window a node may use, in hours');
  if (get('IDEMPOTENCY_MAX_WINDOW_HOURS') !== undefined && topicSettings.retentionHours > 0 && idempotencyMaxWindowHours > topicSettings.retentionHours) {
    problems.push(`IDEMPOTENCY_MAX_WINDOW_HOURS=${idempotencyMaxWindowHours}: at most KAFKA_RETENTION_HOURS (${topicSettings.retentionHours}), or the keys of a window could not be read back from the received topic`);
  }
  if (get('KAFKA_MIN_INSYNC_REPLICAS') !== undefined && topicSettings.minInsyncReplicas > topicSettings.replicationFactor) {
    problems.push(`KAFKA_MIN_INSYNC_REPLICAS=${topicSettings.minInsyncReplicas}: at most KAFKA_REPLICATION_FACTOR (${topicSettings.replicationFactor}), or no append could ever be acknowledged`);
  }

  // The default follows a shorter retention, as the idempotency window does.
  let mdnWindowHours = topicSettings.retentionHours > 0 ? Math.min(24, topicSettings.retentionHours) : 24;
  const mdnWindowRaw = get('AS2_MDN_RETRY_HOURS');
  if (mdnWindowRaw !== undefined) {
    mdnWindowHours = /^\d+(\.\d+)?$/.test(mdnWindowRaw) ? Number(mdnWindowRaw) : NaN;
    // At least a millisecond once converted: a smaller one rounded to a window of 0, in which no retry was ever due.
    if (!(Math.round(mdnWindowHours * 3_600_000) >= 1 && mdnWindowHours <= 8760)) {
      problems.push(`AS2_MDN_RETRY_HOURS=${JSON.stringify(mdnWindowRaw)}: how long an asynchronous MDN's delivery is retried after the message was accepted, in hours (a number above 0 and at most 8760, at least a millisecond; decimals allowed, e.g. 0.5)`);
      mdnWindowHours = 1;
    } else if (topicSettings.retentionHours > 0 && mdnWindowHours > topicSettings.retentionHours) {
      problems.push(`AS2_MDN_RETRY_HOURS=${mdnWindowRaw}: at most KAFKA_RETENTION_HOURS (${topicSettings.retentionHours}), or a retry record could be deleted before it is due`);
    }
  }
  let mdnDelays: [number, number, number] = [30_000, 300_000, 1_800_000];
  const mdnDelaysRaw = get('AS2_MDN_RETRY_DELAYS');
  if (mdnDelaysRaw !== undefined) {
    const parsed = parseRetryDelays(mdnDelaysRaw);
    if (typeof parsed === 'string') problems.push(`AS2_MDN_RETRY_DELAYS=${JSON.stringify(mdnDelaysRaw)}: ${parsed}`);
    else mdnDelays = parsed;
  }
  let mdnFirstDelay = APPEND_TIMEOUT_MS + MDN_FAILURE_EVIDENCE_MARGIN_MS;
  const mdnFirstDelayRaw = get('AS2_MDN_FIRST_ATTEMPT_DELAY');
  if (mdnFirstDelayRaw !== undefined) {
    const m = DURATION.exec(mdnFirstDelayRaw.trim());
    const ms = m ? Number(m[1]) * DURATION_MS[m[2]] : NaN;
    if (ms >= 0 && ms <= 3_600_000) mdnFirstDelay = ms;
    else problems.push(`AS2_MDN_FIRST_ATTEMPT_DELAY=${JSON.stringify(mdnFirstDelayRaw)}: how long after its message was appended an asynchronous MDN is first sent, a duration from 0ms to 1h with a unit (ms, s, m, h), e.g. 30s`);
  }
  const as2MdnRetry: As2MdnRetrySettings = { windowMs: Math.round(mdnWindowHours * 3_600_000), delaysMs: mdnDelays, firstAttemptDelayMs: Math.round(mdnFirstDelay) };
  const journal: JournalSettings = {
    retentionDays: integer('JOURNAL_RETENTION_DAYS', 30, 1, 3650, 'days the request journal keeps an entry'),
    refusedPerMinute: integer('JOURNAL_REFUSED_PER_MINUTE', 60, 0, 60_000, 'refused requests the request journal records per workflow and minute, 0 for none'),
    traceUrl: get('JOURNAL_TRACE_URL') ?? null,
  };
  if (journal.traceUrl !== null && (!/^https?:\/\//.test(journal.traceUrl) || !journal.traceUrl.includes('{traceId}'))) {
    problems.push(`JOURNAL_TRACE_URL=${shownUrl(journal.traceUrl)}: an http:// or https:// URL with {traceId} where the trace id goes, e.g. http://localhost:16686/trace/{traceId}`);
  }

  if (problems.length) throw new ConfigError(problems);
  return {
    port, host, dataDir, publicBaseUrl, logLevel: level as Config['logLevel'], kafka, recordKey, blob, cosmos, encryptionKey, previousEncryptionKey,
    maxBodyBytes, inlineBodyMax, maxInflatedBytes, maxInflationRatio, maxHeldBodyBytes, as2AllowMd5: allowMd5 === 'true', certExpiryWarningDays, multipart, maxFormFields, workflowCacheMs, bodyIdleMs, bodyMinBytesPerSecond, sampleDataKeep, executionQueues, topicPrefix, topicSettings,
    adminPort, ...admin, shutdownGraceMs, maxPendingAccepts, maxPendingAcceptBytes, redactQueryParams, idempotencyMaxWindowHours, journal, as2MdnRetry, stageThreads, stageWatchdogMs, replayLedgerMaxOriginals, replayLandingWindowMs,
  };
}
