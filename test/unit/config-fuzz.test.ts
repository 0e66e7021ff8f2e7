import { checkCredentialDocument, checkWorkflowDocument } from '../../services/admin/operations/documents';
import { triggerCatalog } from '../../services/cli/start';
import { ConfigError, loadConfig, type Config } from '../../services/platform/config/config';
import { DocumentError } from '../../services/platform/registry/documents';
import { admissionOptions } from '../../services/triggers/webhook/admission-options';
import { webhookIdempotency } from '../../services/triggers/webhook/idempotency';
import { webhookParameters } from '../../services/triggers/webhook/parameters';
import { caseSeed, fuzzSettings, prng, type Rng } from '../support/prng';
import { FULL_WEBHOOK_NODE, mutateDocument } from '../support/fuzz-documents';

/**
 * Seeded random environments through loadConfig (docs/configuration.md): each either gives a configuration whose
 * numbers are whole, finite and within the ranges the page documents, and whose topic names Kafka would take, or
 * throws a ConfigError each of whose lines names a variable that is set; never another exception, and never a
 * secret's value (the keys, the connection string, admin tokens, a URL's password or query) in a message.
 * FUZZ_CASES=20000 (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE.
 */
const { seed: SEED, cases: CASES, only: ONLY_CASE } = fuzzSettings(3000);

/** Every variable loadConfig reads, with a valid value or two each to mutate. */
const VARIABLES: Record<string, readonly string[]> = {
  PORT: ['8080', '0'], HOST: ['0.0.0.0', '::1', 'localhost'], DATA_DIR: ['./data', '/tmp/x'], PUBLIC_BASE_URL: ['https://hooks.example.com/'],
  LOG_LEVEL: ['info', 'DEBUG'], KAFKA_BROKERS: ['k1:9092, k2:9093', '[::1]:9092'], KAFKA_CLIENT_ID: ['ingress-a'],
  KAFKA_SESSION_TIMEOUT_MS: ['6000', '30000'], KAFKA_HEARTBEAT_INTERVAL_MS: ['1000', '2000'], KAFKA_LINGER_MS: ['0', '5'], RECORD_KEY: ['workflow', 'Request'],
  AZURE_STORAGE_CONNECTION_STRING: ['DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k', 'UseDevelopmentStorage=true'], BLOB_CONTAINER: ['ingress', 'my-files'],
  COSMOS_ENDPOINT: ['https://acct.documents.azure.com:443/'], COSMOS_KEY: ['a2V5'], COSMOS_DATABASE: ['ingress'], COSMOS_CA_FILE: ['/tmp/ca.pem'],
  OTEL_TRACES_EXPORTER: ['otlp', 'none', 'otlp,console'], OTEL_METRICS_EXPORTER: ['prometheus'], OTEL_SDK_DISABLED: ['true', 'FALSE'],
  INGRESS_ENCRYPTION_KEY: ['0123456789abcdef0123'], INGRESS_ENCRYPTION_KEY_PREVIOUS: ['fedcba9876543210fedc'],
  MAX_BODY_BYTES: ['64MiB', '1024'], INLINE_BODY_MAX: ['256KiB', '0'], MAX_INFLATED_BYTES: ['256 MiB'], MAX_INFLATION_RATIO: ['100', '1032'], MAX_HELD_BODY_BYTES: ['256MiB', '1GiB'],
  AS2_ALLOW_MD5: ['false', 'TRUE'], CERT_EXPIRY_WARNING_DAYS: ['30', '0'], MULTIPART_MAX_FILE_BYTES: ['1MiB'], MULTIPART_MAX_FILES: ['100'], MULTIPART_MAX_FIELDS: ['1000'], FORM_MAX_FIELDS: ['10000'],
  SAMPLE_DATA_KEEP: ['5'], REDACT_QUERY_PARAMS: ['code,state'], WORKFLOW_CACHE_MS: ['2000'], BODY_IDLE_TIMEOUT_MS: ['60000'], BODY_MIN_BYTES_PER_SECOND: ['240'],
  INGRESS_TOPIC_PREFIX: ['stg.', 'a'.repeat(100)], EXECUTION_QUEUE_WEBHOOK: ['executions.requested.v1', 'x'.repeat(249)], EXECUTION_QUEUE_AS2: ['as2.v1'],
  EXECUTION_QUEUE_LOGISTICS: ['logistics'], EXECUTION_QUEUE_WAREHOUSE: ['wh'], EXECUTION_QUEUE_FAX: ['fax'],
  ADMIN_PORT: ['8081', '0'], ADMIN_HOST: ['127.0.0.1', '0.0.0.0'], ADMIN_TOKENS: ['ops:full:', 'ci:read:'], ADMIN_URL: ['http://127.0.0.1:8081'], ADMIN_TOKEN: ['t'],
  SHUTDOWN_GRACE_MS: ['25000'], MAX_PENDING_ACCEPTS: ['2000'], MAX_PENDING_ACCEPT_BYTES: ['64MiB'], STAGE_THREADS: ['1', '0'], REPLAY_LEDGER_MAX_ORIGINALS: ['100000'],
  REPLAY_LANDING_WINDOW_MS: ['60000'], STAGE_WATCHDOG_MS: ['60000'], UV_THREADPOOL_SIZE: ['16'], KAFKA_REPLICATION_FACTOR: ['3', '1'], KAFKA_TOPIC_PARTITIONS: ['6'],
  KAFKA_MIN_INSYNC_REPLICAS: ['2'], KAFKA_RETENTION_HOURS: ['168', '0'], KAFKA_DEAD_LETTER_RETENTION_HOURS: ['720'], IDEMPOTENCY_MAX_WINDOW_HOURS: ['72'],
  AS2_MDN_RETRY_HOURS: ['24', '0.5'], AS2_MDN_RETRY_DELAYS: ['30s,5m,30m', '10ms,1s,1h'], AS2_MDN_FIRST_ATTEMPT_DELAY: ['30s', '0ms'],
  JOURNAL_RETENTION_DAYS: ['30'], JOURNAL_REFUSED_PER_MINUTE: ['60', '0'], JOURNAL_TRACE_URL: ['http://localhost:16686/trace/{traceId}'],
};

/** Variables whose whole value is secret; ADMIN_TOKENS' tokens and URLs' userinfo and queries are made secret below. */
const SECRET_VARIABLES = ['AZURE_STORAGE_CONNECTION_STRING', 'COSMOS_ENDPOINT', 'COSMOS_KEY', 'INGRESS_ENCRYPTION_KEY', 'INGRESS_ENCRYPTION_KEY_PREVIOUS', 'ADMIN_TOKEN'];
const URL_VARIABLES = ['PUBLIC_BASE_URL', 'ADMIN_URL', 'JOURNAL_TRACE_URL', 'COSMOS_ENDPOINT'];
/** Marks a secret: no problem line may hold it. Letters only, so that it passes every charset a secret may have. */
const MARK = 'QzSecretMarkQz';

const GiB = 1024 ** 3;
/** [min, max] of each number of a Config, as docs/configuration.md documents them. */
const RANGES: Array<[string, (c: Config) => number | null | undefined, number, number]> = [
  ['port', (c) => c.port, 0, 65535], ['adminPort', (c) => c.adminPort, 1, 65535],
  ['kafka.sessionTimeoutMs', (c) => c.kafka?.sessionTimeoutMs, 1000, 1_800_000], ['kafka.heartbeatIntervalMs', (c) => c.kafka?.heartbeatIntervalMs, 100, 600_000],
  ['kafka.lingerMs', (c) => c.kafka?.lingerMs, 0, 1000],
  ['maxBodyBytes', (c) => c.maxBodyBytes, 1024, 16 * GiB], ['inlineBodyMax', (c) => c.inlineBodyMax, 0, 768 * 1024], ['maxInflatedBytes', (c) => c.maxInflatedBytes, 1024, 16 * GiB], ['maxInflationRatio', (c) => c.maxInflationRatio, 2, 1032],
  ['maxHeldBodyBytes', (c) => c.maxHeldBodyBytes, 1024 ** 2, 64 * GiB], ['certExpiryWarningDays', (c) => c.certExpiryWarningDays, 0, 3650],
  ['multipart.maxFileBytes', (c) => c.multipart.maxFileBytes, 1, 16 * GiB], ['multipart.maxFiles', (c) => c.multipart.maxFiles, 1, 10_000],
  ['multipart.maxFields', (c) => c.multipart.maxFields, 1, 100_000], ['sampleDataKeep', (c) => c.sampleDataKeep, 1, 100], ['workflowCacheMs', (c) => c.workflowCacheMs, 0, 3_600_000],
  ['bodyIdleMs', (c) => c.bodyIdleMs, 100, 300_000], ['bodyMinBytesPerSecond', (c) => c.bodyMinBytesPerSecond, 0, 1024 * 1024],
  ['shutdownGraceMs', (c) => c.shutdownGraceMs, 1000, 3_600_000], ['maxPendingAccepts', (c) => c.maxPendingAccepts, 1, 1_000_000],
  ['maxPendingAcceptBytes', (c) => c.maxPendingAcceptBytes, 1024, 16 * GiB], ['stageThreads', (c) => c.stageThreads, 0, 1], ['stageWatchdogMs', (c) => c.stageWatchdogMs, 1000, 3_600_000],
  ['replayLedgerMaxOriginals', (c) => c.replayLedgerMaxOriginals, 1000, 2_000_000], ['replayLandingWindowMs', (c) => c.replayLandingWindowMs, 1000, 3_600_000],
  ['idempotencyMaxWindowHours', (c) => c.idempotencyMaxWindowHours, 1, 8760],
  ['topicSettings.partitions', (c) => c.topicSettings.partitions, 1, 10_000], ['topicSettings.replicationFactor', (c) => c.topicSettings.replicationFactor, 1, 16],
  ['topicSettings.minInsyncReplicas', (c) => c.topicSettings.minInsyncReplicas, 1, 16], ['topicSettings.retentionHours', (c) => c.topicSettings.retentionHours, 0, 876_000],
  ['topicSettings.deadLetterRetentionHours', (c) => c.topicSettings.deadLetterRetentionHours, 0, 876_000],
  ['as2MdnRetry.windowMs', (c) => c.as2MdnRetry.windowMs, 1, 8760 * 3_600_000], ['as2MdnRetry.firstAttemptDelayMs', (c) => c.as2MdnRetry.firstAttemptDelayMs, 0, 3_600_000],
  ['as2MdnRetry.delaysMs[0]', (c) => c.as2MdnRetry.delaysMs[0], 10, 86_400_000], ['as2MdnRetry.delaysMs[1]', (c) => c.as2MdnRetry.delaysMs[1], 10, 86_400_000],
  ['as2MdnRetry.delaysMs[2]', (c) => c.as2MdnRetry.delaysMs[2], 10, 86_400_000],
  ['journal.retentionDays', (c) => c.journal.retentionDays, 1, 3650], ['journal.refusedPerMinute', (c) => c.journal.refusedPerMinute, 0, 60_000],
];

/** Values of no particular variable: the odd things an environment holds. */
function oddValue(rng: Rng): string {
  switch (rng.int(0, 9)) {
    case 0: return rng.pick(['', ' ', '\t', '\n', '\u00a0', '\u3000', ' \r\n ']);
    case 1: return rng.pick(['-1', '-0', '0', '1', '+5', '007', '1.5', '0.0000001', '1e3', '1E-3', '0x10', '0b1', '0o7', 'NaN', 'Infinity', '-Infinity', '1_000', '1,000', '9'.repeat(rng.int(16, 400)), String(2 ** 53 + 1), '١٢', '１２', '²']);
    case 2: return rng.pick(['64MiB', '1 KiB', '1kb', '1MB', '10GiB', '9999999999GiB', '0B', '-1KiB', '1.5MiB', 'MiB', '1 MiB ']);
    case 3: return rng.pick(['30s', '10ms', '10.5ms', '0.0105s', '0.0000001h', '1e3s', '5m,30m,1h', '1h,1m,1s', '10ms,10ms,10ms', '1.00001s,2s,3s', 's', '24h', '25h', ',,', '0ms']);
    case 4: return rng.pick(['true', 'TRUE', 'yes', 'on', '1', 'null', 'undefined', '{}', '{"a":1}', '[1,2]', '"quoted"', "'single'"]);
    case 5: return rng.pick(['127.0.0.1', '::1', '[::1]', 'fe80::1%eth0', 'localhost', 'a'.repeat(rng.int(200, 300)), '256.1.1.1', '-', ':::', 'host name']);
    case 6: return rng.pick(['http://x', 'https://h/', 'ftp://h', 'http://', 'http://h/?q=1', 'http://h/#f', 'javascript:alert(1)', 'http://[::1]:8081', '//h/p', 'http://h:99999']);
    case 7: return rng.pick(['a,b', ',', ', ,', 'k:9092;k2:9093', 'k:99999', 'k:', ':9092', '[::1]:9092,[zz]:1', 'k:9092\nk2:9092', 'a:b:c:d']);
    case 8: return rng.pick(['.', '..', '...', 'x'.repeat(rng.int(240, 260)), '\u0000', '\u202e', '😀', '\ud800', 'é', '\u0130', '$(id)', '%00', '\\', '"']);
    default: return rng.bytes(rng.int(0, 40)).toString('latin1');
  }
}

function mutate(rng: Rng, text: string): string {
  const at = rng.int(0, text.length);
  switch (rng.int(0, 7)) {
    case 0: return text.slice(0, at) + oddValue(rng).slice(0, 3) + text.slice(at);
    case 1: return text.slice(0, at) + text.slice(at + 1);
    case 2: return text + text;
    case 3: return `-${text}`;
    case 4: return ` ${text} `;
    case 5: return text.replace(/\d/, () => String(rng.int(0, 9)).repeat(rng.int(1, 12)));
    case 6: return text.replace(/[a-z]/i, (c) => (rng.chance(0.5) ? c.toUpperCase() : c.toLowerCase()));
    default: return text.slice(0, at);
  }
}

const secret = (rng: Rng) => rng.pick(['', 'Ab1', 'x'.repeat(rng.int(10, 40)), rng.bytes(8).toString('base64')]) + MARK + rng.pick(['', '=', '/+', ':', ',', '@', ' ', '"']);

function secretValue(rng: Rng, name: string): string {
  if (name === 'AZURE_STORAGE_CONNECTION_STRING') return rng.pick([`AccountName=a;AccountKey=${secret(rng)}`, `BlobEndpoint=https://a/;SharedAccessSignature=${secret(rng)}`, secret(rng), `DefaultEndpoints;Key=${secret(rng)}`]);
  if (name === 'COSMOS_ENDPOINT') return rng.pick([`https://acct/?key=${secret(rng)}`, `AccountEndpoint=https://a/;AccountKey=${secret(rng)}`, secret(rng), `https://u:${secret(rng)}@acct/`]);
  return secret(rng);
}

function urlValue(rng: Rng): string {
  const base = rng.pick(['http://h', 'https://hooks.example.com', 'http://[::1]:8081', 'ftp://h', 'h', 'http://', 'https://h/trace/{traceId}']);
  return rng.pick([
    `${base.replace('://', `://u:${secret(rng)}@`)}/x`, `${base}/p?token=${secret(rng)}`, `${base}#${secret(rng)}`, `${base.replace('://', `://${secret(rng)}@`)}`,
    `http:u:${secret(rng)}@h`, `${base.replace('://', `://u:${secret(rng)}/p@`)}host/b`, `${base}?a=1&secret=${secret(rng)}@x/y`,
  ]);
}

function adminTokens(rng: Rng): string {
  const entries = Array.from({ length: rng.int(1, 4) }, () => {
    const name = rng.pick(['ops', 'ci', 'local-cli', '', '-x', 'a'.repeat(70), 'n.1', 'ops']);
    const scope = rng.pick(['full', 'read', 'write', '', 'FULL']);
    const token = rng.pick(['', 'short', 'A'.repeat(32)]) + secret(rng).replace(/[ ",:@]/g, '') + rng.pick(['', 'x'.repeat(20), '!', 'é'.repeat(20)]);
    return rng.pick([`${name}:${scope}:${token}`, `${name}:${token}`, token, `${token.padStart(32, 'T')}:${scope}:${name}`, `${scope}:${token}`, `${name}:${scope}:${token}:${token}`, `${name} : ${scope} : ${token}`]);
  });
  return entries.join(rng.pick([',', ', ', ',,', ';']));
}

const duration = (rng: Rng) => `${rng.pick(['0', '1', '10', '9.5', '10.5', '0.0105', '0.5', '1.00001', '24', '86400000', '3.3333'])}${rng.pick(['ms', 's', 'm', 'h', '', 'S', 'd'])}`;
const topicName = (rng: Rng) => rng.pick(['.', '..', 'a', 'x'.repeat(rng.int(140, 260)), 'ok.v1']);

function environment(rng: Rng): Record<string, string> {
  const env: Record<string, string> = {};
  const names = Object.keys(VARIABLES);
  for (let i = rng.int(1, 12); i > 0; i--) {
    const name = rng.pick(names);
    const roll = rng.next();
    if (name === 'ADMIN_TOKENS' && roll < 0.7) env[name] = adminTokens(rng);
    else if (SECRET_VARIABLES.includes(name) && roll < 0.8) env[name] = secretValue(rng, name);
    else if (URL_VARIABLES.includes(name) && roll < 0.5) env[name] = urlValue(rng);
    else if (/^AS2_MDN_(RETRY_DELAYS|FIRST_ATTEMPT_DELAY)$/.test(name) && roll < 0.5) env[name] = Array.from({ length: name.endsWith('DELAYS') ? rng.int(2, 4) : 1 }, () => duration(rng)).sort().join(',');
    else if (/^(EXECUTION_QUEUE_|INGRESS_TOPIC_PREFIX)/.test(name) && roll < 0.4) env[name] = topicName(rng);
    else if (roll < 0.35) env[name] = rng.pick(VARIABLES[name]);
    else if (roll < 0.75) env[name] = mutate(rng, rng.pick(VARIABLES[name]));
    else env[name] = oddValue(rng);
  }
  // Set in pairs often enough that the second half of a check runs.
  if (env.COSMOS_ENDPOINT !== undefined && rng.chance(0.7)) env.COSMOS_KEY ??= secretValue(rng, 'COSMOS_KEY');
  if (env.ADMIN_URL !== undefined && rng.chance(0.7)) env.ADMIN_TOKEN ??= secretValue(rng, 'ADMIN_TOKEN');
  if (env.BLOB_CONTAINER !== undefined && rng.chance(0.7)) env.AZURE_STORAGE_CONNECTION_STRING ??= 'UseDevelopmentStorage=true';
  return env;
}

/** Kafka's own rule for a topic name (kafka.common.internals.Topic.validate). */
const kafkaTopicProblem = (name: string) => (/^[A-Za-z0-9._-]{1,249}$/.test(name) && name !== '.' && name !== '..' ? null : `not a topic name Kafka accepts: ${JSON.stringify(name.slice(0, 60))}… (${name.length} characters)`);

function check(env: Record<string, string>): string[] {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) return [`threw ${(error as Error)?.name}: ${(error as Error)?.message}`];
    const wrong: string[] = [];
    const set = Object.keys(env).filter((name) => env[name].trim() !== '');
    if (error.problems.length === 0) wrong.push('a ConfigError with no problem in it');
    for (const problem of error.problems) {
      if (!set.some((name) => problem.includes(name))) wrong.push(`names no variable that is set: ${problem}`);
      if (problem.includes(MARK)) wrong.push(`echoes a secret: ${problem}`);
    }
    if (error.message.includes(MARK)) wrong.push('the message echoes a secret');
    return wrong;
  }
  const wrong: string[] = [];
  for (const [what, read, min, max] of RANGES) {
    const n = read(config);
    if (n === null || n === undefined) continue;
    if (!Number.isSafeInteger(n) || n < min || n > max) wrong.push(`${what} = ${n}: not a whole number from ${min} to ${max}`);
  }
  const { delaysMs } = config.as2MdnRetry;
  if (!(delaysMs[0] <= delaysMs[1] && delaysMs[1] <= delaysMs[2])) wrong.push(`as2MdnRetry.delaysMs ${delaysMs.join(', ')}: not ascending`);
  if (config.topicSettings.minInsyncReplicas > config.topicSettings.replicationFactor && env.KAFKA_MIN_INSYNC_REPLICAS?.trim()) wrong.push('min.insync.replicas above the replication factor');
  for (const [kind, topic] of Object.entries(config.executionQueues)) {
    const problem = kafkaTopicProblem(topic);
    if (problem) wrong.push(`executionQueues.${kind}: ${problem}`);
  }
  if (config.adminPort !== null && config.adminPort === config.port) wrong.push('the admin port is the receiver\'s');
  return wrong;
}

test(`loadConfig gives numbers in their documented ranges or a ConfigError naming the variable, and never a secret (FUZZ_SEED=${SEED}, ${CASES} cases)`, () => {
  const failures: string[] = [];
  const outcomes = { loaded: 0, refused: 0 };
  for (let n = 0; n < CASES; n++) {
    if (ONLY_CASE !== null && n !== ONLY_CASE) continue;
    const env = environment(prng(caseSeed(SEED, n)));
    const wrong = check(env);
    try { loadConfig(env); outcomes.loaded++; } catch { outcomes.refused++; }
    if (wrong.length) failures.push(`FUZZ_SEED=${SEED} FUZZ_CASE=${n} env ${JSON.stringify(env).slice(0, 600)}:\n  ${wrong.join('\n  ')}`);
    if (failures.length >= 10) break;
  }
  expect(failures).toEqual([]);
  // Both sides of the property are reached (not every case refused).
  if (ONLY_CASE === null) expect(Math.min(outcomes.loaded, outcomes.refused)).toBeGreaterThan(CASES / 20);
});

// ---------------------------------------------------------------------------------------------------------------
// Documents checked at put time (`workflows put`, `credentials put`, the management API's PUTs)

const WEBHOOK_NODE = FULL_WEBHOOK_NODE;
const WORKFLOWS = [
  { id: 'wf-a', name: 'A', active: true, nodes: [WEBHOOK_NODE, { name: 'Next', type: 'noop' }] },
  { id: 'wf-b', active: false, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'none', options: { idempotencyKey: { json: 'order.id' }, rateLimit: { perSecond: 0.2, burst: 2 } } } }] },
  { id: 'wf-c', active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'standardWebhooks', options: { idempotencyKey: { standardWebhooks: true } } }, credentials: { standardWebhooks: 'c' } }] },
  { id: 'wf-d', active: true, nodes: [{ name: 'L', type: 'logistics', parameters: {} }, { name: 'W', type: 'warehouse', parameters: {} }] },
];
const CREDENTIALS = [
  { id: 'c1', type: 'headerAuth', data: { name: 'X-Key', value: 'v' } }, { id: 'c2', type: 'basicAuth', data: { user: 'u', password: 'p' } },
  { id: 'c3', type: 'hmac', data: { secrets: ['a', 'b'], header: 'X-Signature', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=', signedContent: '{timestamp}.{body}', timestampHeader: 'X-Timestamp', toleranceSeconds: 300 } },
  { id: 'c4', type: 'hmac', data: { preset: 'stripe', secrets: ['s'] } }, { id: 'c5', type: 'standardWebhooks', data: { secrets: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], toleranceSeconds: 300 } },
  { id: 'c6', type: 'jwt', data: { keys: ['-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n'], algorithms: ['EdDSA'], issuer: 'i', audience: 'a' } },
];
const ODD_JSON: unknown[] = [null, true, false, 0, -1, 0.5, 1e308, -1e308, 2 ** 53 + 1, NaN, '', ' ', 'x'.repeat(3000), 'é', '\u0000', '\ud800', [], {}, [null], { '': 1 }, 'none', '0.0.0.0/0', '::/0', '10.0.0.0/33', '1.2.3.4/-1', 'fe80::1%eth0', '__proto__', 'constructor'];

const ODD_KEYS = ['extra', 'constructor', 'toString', 'id', 'type', 'nodes', 'data', 'options', 'secrets', ''];
const mutated = (rng: Rng, value: unknown) => mutateDocument(rng, value, ODD_JSON, ODD_KEYS);

test(`documents put: a workflow or credential is accepted or refused with a DocumentError, and an accepted webhook node reads at request time (FUZZ_SEED=${SEED}, ${CASES} cases)`, () => {
  const catalog = triggerCatalog(loadConfig({}));
  const failures: string[] = [];
  const outcomes = { accepted: 0, refused: 0 };
  for (let n = 0; n < CASES; n++) {
    if (ONLY_CASE !== null && n !== ONLY_CASE) continue;
    const rng = prng(caseSeed(SEED ^ 0x5eed, n));
    const workflow = rng.chance(0.6);
    // Through JSON, as a PUT's body arrives: no undefined, NaN as null.
    const input = JSON.parse(JSON.stringify(mutated(rng, rng.pick<unknown>(workflow ? WORKFLOWS : CREDENTIALS))) ?? 'null');
    const wrong: string[] = [];
    try {
      if (workflow) {
        const doc = checkWorkflowDocument(input, catalog);
        for (const node of doc.nodes.filter((x) => x.type === 'webhook')) { webhookParameters(node); admissionOptions(node); webhookIdempotency(node); }
      } else {
        checkCredentialDocument(input, Date.now());
      }
      outcomes.accepted++;
    } catch (error) {
      if (!(error instanceof DocumentError)) wrong.push(`threw ${(error as Error)?.name}: ${(error as Error)?.message}`);
      else if (error.problems.length === 0 || error.problems.some((p) => typeof p !== 'string' || p === '')) wrong.push('a DocumentError without a problem');
      outcomes.refused++;
    }
    if (wrong.length) failures.push(`FUZZ_SEED=${SEED} FUZZ_CASE=${n} ${JSON.stringify(input).slice(0, 800)}:\n  ${wrong.join('\n  ')}`);
    if (failures.length >= 10) break;
  }
  expect(failures).toEqual([]);
  if (ONLY_CASE === null) expect(Math.min(outcomes.accepted, outcomes.refused)).toBeGreaterThan(CASES / 50);
});
