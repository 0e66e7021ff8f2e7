import { readFileSync } from 'node:fs';
import { Kafka, logLevel, type LogEntry, type RetryOptions } from 'kafkajs';
import { EventLogError } from '../event-log';
import type { Fields, Logger } from '../../logger/logger';
import { useStableOffsetFetch } from './stable-offset-fetch';

/**
 * The kafkajs client of one EventLog: its own console logging routed to our Logger (warn and error only,
 * never a message body), and the failure description every adapter error uses.
 */
export interface KafkaClientOptions {
  brokers: string[];
  clientId: string;
  logger: Logger;
  /** TCP connect timeout per broker, ms (kafkajs default 1000). */
  connectionTimeout?: number;
  /** How long a request may wait for its response, ms (kafkajs default 30000). */
  requestTimeout?: number;
  /** Retries of connects, metadata and admin requests (consumers and producers add their own on top). */
  retry?: RetryOptions;
}

export const DEFAULT_CLIENT_RETRY: RetryOptions = { initialRetryTime: 200, maxRetryTime: 5_000, retries: 8 };
export const DEFAULT_CONNECTION_TIMEOUT_MS = 3_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

export function createKafkaClient(options: KafkaClientOptions): Kafka {
  requirePatchedKafkajs();
  // Every committed offset this process reads is a stable one (stable-offset-fetch.ts).
  useStableOffsetFetch();
  return new Kafka({
    clientId: options.clientId,
    brokers: options.brokers,
    connectionTimeout: options.connectionTimeout ?? DEFAULT_CONNECTION_TIMEOUT_MS,
    requestTimeout: options.requestTimeout ?? DEFAULT_REQUEST_TIMEOUT_MS,
    retry: { ...DEFAULT_CLIENT_RETRY, ...options.retry },
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => forwardLogEntry(options.logger, entry),
  });
}

let patchChecked = false;

/**
 * patches/kafkajs+2.2.4.patch, applied by `npm install`'s postinstall (patch-package), mends two kafkajs 2.2.4
 * defects that break our promises, so no Kafka client starts without it:
 * - a send's records were lost when a partition's leader moved to a broker that answered an earlier attempt of
 *   the same send (tulios/kafkajs#1303): 200 for records a broker failover dropped. Retried per partition;
 * - read_committed let records of aborted transactions through when a partition's aborted transactions were
 *   listed out of offset order or overlapped (a dead letter, or a decoded record, of an aborted transaction read
 *   as committed: an execution twice). Sorted, all taken; and ended only by a control record, not by a data
 *   record whose key happens to be the abort marker's four zero bytes.
 * An install without it (`--ignore-scripts`) is refused. The markers name the patch's revisions: an install
 * that kept an earlier revision (node_modules not reinstalled after a pull) is refused too.
 */
const KAFKAJS_PATCHES: [file: string, marker: string][] = [
  ['kafkajs/src/producer/sendMessages.js', 'ingress-patch 2: retry per partition'],
  ['kafkajs/src/consumer/filterAbortedMessages.js', 'ingress-patch 4: aborted transactions in offset order'],
];

function requirePatchedKafkajs(): void {
  if (patchChecked) return;
  for (const [module, marker] of KAFKAJS_PATCHES) {
    const file = require.resolve(module);
    if (!readFileSync(file, 'utf8').includes(marker)) {
      throw new Error(`kafkajs is not patched, or not with this revision of the patch (${file}): run npm install or npm ci, whose postinstall applies patches/kafkajs+2.2.4.patch; without it a broker failover can drop records that were answered 200 or write them twice, and a record of an aborted transaction can be read as committed`);
    }
  }
  patchChecked = true;
}

/**
 * kafkajs warns about these on purpose-made configurations: the partitioner is chosen explicitly, and the
 * append producer's bounded retries are safe because a producer that failed a send is replaced (new producer id).
 */
const EXPECTED_WARNINGS = [/switched default partitioner/, /Limiting retries for the idempotent producer/];

/** Only facts about the client travel to our logs; the extra fields kafkajs attaches can hold anything. */
const FORWARDED_FIELDS = ['groupId', 'memberId', 'topic', 'partition', 'broker', 'retryCount', 'retryTime', 'transactionalId', 'type'];

/** Kafka's errors of group coordination, by type, which a consumer crash can carry. */
const COORDINATION_ERRORS = new Set(['COORDINATOR_LOAD_IN_PROGRESS', 'COORDINATOR_NOT_AVAILABLE', 'NOT_COORDINATOR', 'REBALANCE_IN_PROGRESS', 'UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION', 'MEMBER_ID_REQUIRED']);

/**
 * The group and transaction chatter of a healthy cluster: a rebalance, a coordinator that moved or is loading,
 * a transaction still being completed, a member that must rejoin. kafkajs logs each at `error` and then retries
 * or rejoins by itself; the stage logs one line of its own for what matters (joined, fenced, retrying).
 * Named by kafkajs's words or by Kafka's error types: the coordination ones above, and those of transactions.
 */
const COORDINATION = new RegExp(
  ['rebalanc', 're-?join', 'not aware of this member', 'coordinator', 'concurrent (?:operation|transactions)', 'newer producer with the same transactionalId',
    ...COORDINATION_ERRORS, 'CONCURRENT_TRANSACTIONS', 'INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED'].join('|'),
  'i',
);

/**
 * A partition's leader being elected or moved (a topic just created, a broker restarting): kafkajs takes the
 * metadata for stale, refreshes it and retries. Named by Kafka's error, which a failed response carries beside
 * its "Response ListOffsets(…)" line; `topics apply` meets it each time it asks new partitions' leaders.
 */
const LEADER_MOVING = new Set(['LEADER_NOT_AVAILABLE', 'NOT_LEADER_FOR_PARTITION']);

/**
 * kafkajs restarts a crashed consumer by itself; the stage has said why in its own line (CRASH, in
 * transactional-stage.ts), so this one adds nothing but the delay.
 */
const CONSUMER_RESTART = /^Restarting the consumer in \d+ms$/;

/** The group's offset is gone (retention deleted records it had not read): kafkajs resets it, and they are lost. */
const DATA_LOST = /^Offset out of range, resetting/;

/** Whether an error, or one of its causes, is Kafka's word that the group is still being coordinated. */
export function isCoordinationError(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current && typeof current === 'object'; depth++) {
    const e = current as KafkaLikeError;
    if (typeof e.type === 'string' && COORDINATION_ERRORS.has(e.type)) return true;
    const next = e.cause ?? e.originalError;
    current = next === current ? undefined : next;
  }
  return false;
}

/**
 * kafkajs's lines, one level down at least (but for records lost to retention, which an operator must hear of): whatever it logs it also retries, or reports to the caller, which
 * decides. `error` is left for what an operator must act on, and only our own code knows that (never kafkajs).
 */
export function kafkaLogLevel(entry: Pick<LogEntry, 'level'> & { log: { message: string; error?: unknown } }): 'error' | 'warn' | 'debug' | null {
  if (entry.level !== logLevel.ERROR && entry.level !== logLevel.WARN) return null;
  const text = `${entry.log.message} ${typeof entry.log.error === 'string' ? entry.log.error : ''}`;
  if (EXPECTED_WARNINGS.some((re) => re.test(text))) return null;
  if (DATA_LOST.test(text)) return 'error';
  if (CONSUMER_RESTART.test(entry.log.message)) return 'debug';
  if (LEADER_MOVING.has(protocolErrorNamed(entry.log.error) ?? '')) return 'debug';
  return COORDINATION.test(text) ? 'debug' : 'warn';
}

/**
 * Kafka's protocol errors by the message kafkajs gives each. A failed response is logged as "Response
 * ListOffsets(key: 2, version: 3)" with the error's message beside it, which is not forwarded (a few kafkajs
 * messages embed what failed); when it is exactly one of Kafka's error messages, its name (LEADER_NOT_AVAILABLE)
 * is forwarded instead, so that the line says why.
 */
let protocolErrors: Map<string, string> | null = null;
function protocolErrorNamed(message: unknown): string | undefined {
  if (typeof message !== 'string') return undefined;
  protocolErrors ??= new Map(
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require('kafkajs/src/protocol/error') as { errorCodes: { type: string; message: string }[] }).errorCodes.map((e) => [e.message, e.type]),
  );
  return protocolErrors.get(message);
}

/** The fields of a kafkajs line that travel to our logs. */
export function kafkaLogFields(entry: Pick<LogEntry, 'namespace'> & { log: Record<string, unknown> }): Fields {
  const fields: Fields = { component: 'kafkajs', namespace: entry.namespace };
  for (const name of FORWARDED_FIELDS) {
    const value = entry.log[name];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') fields[name] = value;
  }
  const kafkaError = protocolErrorNamed(entry.log.error);
  if (kafkaError) fields.kafkaError = kafkaError;
  return fields;
}

function forwardLogEntry(logger: Logger, entry: LogEntry): void {
  const level = kafkaLogLevel(entry);
  if (level === null) return;
  logger[level](entry.log.message, kafkaLogFields(entry));
}

interface KafkaLikeError {
  name?: unknown;
  type?: unknown;
  code?: unknown;
  broker?: unknown;
  cause?: unknown;
  originalError?: unknown;
}

/**
 * kafkajs throws a few plain Errors with fixed texts, which then named nothing but "Error". Its own words, so
 * never a record's contents. "Broker not connected" is what a request meets after the broker took the
 * connection and never completed Kafka's handshake (its request timed out): a KAFKA_BROKERS that names a port
 * that is not Kafka's, or a broker that hangs.
 */
const KAFKAJS_PLAIN_ERRORS = new Map([
  ['Broker not connected', 'broker not connected: it took the connection but never completed the Kafka handshake (request timed out; is it a Kafka port?)'],
]);

/**
 * "KafkaJSNumberOfRetriesExceeded <- KafkaJSConnectionError ECONNREFUSED 127.0.0.1:1": the class, Kafka error
 * code and broker address of an error and its causes. kafkajs messages are not copied: a few of them embed the
 * message that failed (e.g. its validation errors), and an EventLogError must never carry record contents.
 */
export function describeKafkaError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current && typeof current === 'object'; depth++) {
    const e = current as KafkaLikeError;
    const words = [typeof e.name === 'string' ? e.name : 'Error'];
    if (typeof e.type === 'string') words.push(e.type);
    else if (typeof e.code === 'string') words.push(e.code);
    if (typeof e.broker === 'string') words.push(e.broker);
    if (current instanceof EventLogError) words.push(current.message);
    else if (current instanceof Error && KAFKAJS_PLAIN_ERRORS.has(current.message)) words.push(KAFKAJS_PLAIN_ERRORS.get(current.message)!);
    parts.push(words.join(' '));
    const next = e.cause ?? e.originalError;
    current = next === current ? undefined : next;
  }
  return parts.length > 0 ? parts.join(' <- ') : String(typeof error);
}

export function unavailable(what: string, error: unknown): EventLogError {
  if (error instanceof EventLogError) return error;
  return new EventLogError(`${what}: ${describeKafkaError(error)}`, 'log-unavailable', { cause: error });
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() { clearTimeout(timer); signal?.removeEventListener('abort', done); resolve(); }
    signal?.addEventListener('abort', done, { once: true });
  });
}
