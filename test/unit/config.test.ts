import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { ConfigError, loadConfig } from '../../services/platform/config/config';
import { gzipSync } from 'node:zlib';
import { triggerCatalog } from '../../services/cli/start';

const problems = (env: Record<string, string>) => {
  try { loadConfig(env); } catch (error) { if (error instanceof ConfigError) return error.problems; throw error; }
  return [];
};

test('defaults select the embedded backends', () => {
  const c = loadConfig({});
  expect(c).toMatchObject({ port: 8080, kafka: null, blob: null, cosmos: null, maxBodyBytes: 64 * 1024 * 1024, inlineBodyMax: 256 * 1024, topicPrefix: '' });
  expect(c.executionQueues).toEqual({ webhook: 'executions.requested.v1', as2: 'executions.requested.v1', logistics: 'executions.requested.v1', warehouse: 'executions.requested.v1' });
});

test('backends are selected by their variables', () => {
  const c = loadConfig({
    KAFKA_BROKERS: 'k1:9092, k2:9093', AZURE_STORAGE_CONNECTION_STRING: 'DefaultEndpointsProtocol=https;AccountName=a;AccountKey=k', BLOB_CONTAINER: 'files',
    COSMOS_ENDPOINT: 'https://acct.documents.azure.com:443/', COSMOS_KEY: 'key', EXECUTION_QUEUE_AS2: 'executions.requested.as2.v1', INGRESS_TOPIC_PREFIX: 'stg.',
  });
  expect(c.kafka?.brokers).toEqual(['k1:9092', 'k2:9093']);
  expect(c.kafka?.clientId).toBe(`ingress-${require('node:os').hostname()}-${process.pid}`);
  expect(c.kafka).toMatchObject({ sessionTimeoutMs: 6000, heartbeatIntervalMs: 1000, lingerMs: 0 });
  expect(c.recordKey).toBe('workflow');
  expect(c.blob?.container).toBe('files');
  expect(c.cosmos?.database).toBe('ingress');
  expect(c.executionQueues.as2).toBe('stg.executions.requested.as2.v1');
  expect(c.executionQueues.webhook).toBe('stg.executions.requested.v1');
});

test('Kafka group timing and the record key are configurable, and contradictions refused', () => {
  const c = loadConfig({ KAFKA_BROKERS: 'k:9092', KAFKA_SESSION_TIMEOUT_MS: '10000', KAFKA_HEARTBEAT_INTERVAL_MS: '2000', RECORD_KEY: 'Request' });
  expect(c.kafka).toMatchObject({ sessionTimeoutMs: 10000, heartbeatIntervalMs: 2000 });
  expect(c.recordKey).toBe('request');
  expect(problems({ KAFKA_SESSION_TIMEOUT_MS: '6000', KAFKA_HEARTBEAT_INTERVAL_MS: '3000' })).toEqual([expect.stringMatching(/^KAFKA_HEARTBEAT_INTERVAL_MS=3000: at most a third of KAFKA_SESSION_TIMEOUT_MS/)]);
  expect(problems({ KAFKA_SESSION_TIMEOUT_MS: 'soon' })).toEqual([expect.stringMatching(/^KAFKA_SESSION_TIMEOUT_MS="soon"/)]);
  expect(problems({ RECORD_KEY: 'partner' })).toEqual([expect.stringMatching(/^RECORD_KEY="partner": workflow .* or request/)]);
  expect(loadConfig({ KAFKA_BROKERS: 'k:9092', KAFKA_LINGER_MS: '5' }).kafka?.lingerMs).toBe(5);
  expect(problems({ UV_THREADPOOL_SIZE: '64' })).toEqual([]);
  expect(problems({ UV_THREADPOOL_SIZE: 'lots' })).toEqual([expect.stringMatching(/^UV_THREADPOOL_SIZE="lots": libuv's thread pool .*a whole number from 1 to 1024/)]);
  expect(problems({ KAFKA_LINGER_MS: '1001' })).toEqual([expect.stringMatching(/^KAFKA_LINGER_MS="1001": .*a whole number from 0 to 1000/)]);
});

test('MD5 for AS2 is off unless asked for', () => {
  expect(loadConfig({}).as2AllowMd5).toBe(false);
  expect(loadConfig({ AS2_ALLOW_MD5: 'TRUE' }).as2AllowMd5).toBe(true);
  expect(loadConfig({ AS2_ALLOW_MD5: 'false' }).as2AllowMd5).toBe(false);
});

test('certificate expiry warnings: 30 days by default, 0 for expired certificates only', () => {
  expect(loadConfig({}).certExpiryWarningDays).toBe(30);
  expect(loadConfig({ CERT_EXPIRY_WARNING_DAYS: '0' }).certExpiryWarningDays).toBe(0);
  expect(loadConfig({ CERT_EXPIRY_WARNING_DAYS: '90' }).certExpiryWarningDays).toBe(90);
});

test('MAX_INFLATION_RATIO: 100 by default, up to 1032 (deflate\'s most), and the webhook trigger is given it', async () => {
  expect(loadConfig({}).maxInflationRatio).toBe(100);
  expect(loadConfig({ MAX_INFLATION_RATIO: '1032' }).maxInflationRatio).toBe(1032);
  expect(loadConfig({ MAX_INFLATION_RATIO: '20' }).maxInflationRatio).toBe(20);
  // 3 MiB of zeros in some 3 KB: over 100 times, under deflate's most.
  const bomb = gzipSync(Buffer.alloc(3 * 1024 * 1024));
  const verdict = async (env: Record<string, string>) => {
    const request = { requestId: 'r', workflowId: 'wf', pathSuffix: null, query: {}, remoteAddress: null, receivedAt: 0, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } };
    const validator = triggerCatalog(loadConfig(env)).pluginFor('webhook')!.validator!(request, { name: 'Hook', type: 'webhook', parameters: {} })!;
    validator.write(bomb);
    return (await validator.end())?.status ?? 'accepted';
  };
  expect(await verdict({})).toBe(413);
  expect(await verdict({ MAX_INFLATION_RATIO: '1032' })).toBe('accepted');
});

test('sizes accept units', () => {
  expect(loadConfig({ MAX_BODY_BYTES: '10MiB', INLINE_BODY_MAX: '4 KiB' })).toMatchObject({ maxBodyBytes: 10 * 1024 * 1024, inlineBodyMax: 4096 });
  expect(loadConfig({ MAX_HELD_BODY_BYTES: '1MiB', INLINE_BODY_MAX: '480KiB' })).toMatchObject({ maxHeldBodyBytes: 1024 * 1024, inlineBodyMax: 480 * 1024 });
});

test.each([
  [{ PORT: 'eighty' }, /^PORT="eighty": the HTTP port/],
  [{ PORT: '70000' }, /^PORT="70000"/],
  [{ KAFKA_BROKERS: 'localhost' }, /^KAFKA_BROKERS="localhost": a comma-separated list of host:port/],
  [{ COSMOS_ENDPOINT: 'https://x/' }, /^COSMOS_ENDPOINT is set without COSMOS_KEY/],
  [{ COSMOS_KEY: 'k' }, /^COSMOS_KEY is set without COSMOS_ENDPOINT/],
  [{ BLOB_CONTAINER: 'x', AZURE_STORAGE_CONNECTION_STRING: 'AccountName=a;AccountKey=k' }, /^BLOB_CONTAINER="x": 3-63 lower-case/],
  [{ BLOB_CONTAINER: 'files' }, /^BLOB_CONTAINER is set but AZURE_STORAGE_CONNECTION_STRING is not/],
  [{ COSMOS_CA_FILE: '/etc/ssl/emulator.pem' }, /^COSMOS_CA_FILE is set but COSMOS_ENDPOINT and COSMOS_KEY are not/],
  [{ OTEL_TRACES_EXPORTER: 'bogus' }, /^OTEL_TRACES_EXPORTER="bogus": "bogus" is no exporter the SDK has \(otlp, zipkin, console, none/],
  [{ OTEL_TRACES_EXPORTER: 'otlp,prometheus' }, /^OTEL_TRACES_EXPORTER="otlp,prometheus": "prometheus" is no exporter/],
  [{ OTEL_METRICS_EXPORTER: 'none, console' }, /^OTEL_METRICS_EXPORTER="none, console": none means no exporter/],
  [{ OTEL_SDK_DISABLED: 'maybe' }, /^OTEL_SDK_DISABLED="maybe": true or false$/],
  [{ MAX_BODY_BYTES: 'lots' }, /^MAX_BODY_BYTES="lots": a size in bytes/],
  [{ INLINE_BODY_MAX: '2MiB' }, /^INLINE_BODY_MAX="2MiB"/],
  [{ INGRESS_ENCRYPTION_KEY: 'short' }, /^INGRESS_ENCRYPTION_KEY: at least 16 characters/],
  [{ PUBLIC_BASE_URL: 'hooks.example.com' }, /^PUBLIC_BASE_URL="hooks.example.com": an absolute/],
  // Hook URLs are PUBLIC_BASE_URL/hook/{id}: userinfo would be printed in each, a query or fragment would come before /hook.
  [{ PUBLIC_BASE_URL: 'https://user:pw@hooks.example/base' }, /^PUBLIC_BASE_URL="https:\/\/…@hooks.example\/base": no user or password in it; an absolute/],
  [{ PUBLIC_BASE_URL: 'https://hooks.example/base?x=1#frag' }, /^PUBLIC_BASE_URL="https:\/\/hooks.example\/base…": no query or fragment in it/],
  [{ PUBLIC_BASE_URL: 'https://hooks.example/#' }, /^PUBLIC_BASE_URL="https:\/\/hooks.example\/…": no query or fragment in it/],
  [{ PUBLIC_BASE_URL: 'https://user:pw@[bad' }, /^PUBLIC_BASE_URL="https:\/\/…@\[bad": an absolute/],
  [{ JOURNAL_TRACE_URL: 'https://user:pw@jaeger/trace?t=1' }, /^JOURNAL_TRACE_URL="https:\/\/…@jaeger\/trace…": an http/],
  [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL="loud": one of/],
  [{ EXECUTION_QUEUE_FAX: 'x' }, /^EXECUTION_QUEUE_FAX: unknown trigger kind/],
  [{ EXECUTION_QUEUE_FAX: 'x', EXECUTION_QUEUE_TELEX: ' ' }, /^EXECUTION_QUEUE_FAX: unknown trigger kind[^\n]*$/],
  [{ EXECUTION_QUEUE_AS2: 'bad topic!' }, /^EXECUTION_QUEUE_AS2="bad topic!": a Kafka topic name/],
  // Kafka refuses these names at topic creation; found by config-fuzz.test.ts.
  [{ EXECUTION_QUEUE_AS2: '..' }, /^EXECUTION_QUEUE_AS2="..": a Kafka topic name .*not "." or ".."/],
  [{ EXECUTION_QUEUE_WEBHOOK: 'x'.repeat(200), INGRESS_TOPIC_PREFIX: 'p'.repeat(50) }, /^EXECUTION_QUEUE_WEBHOOK="x+": with INGRESS_TOPIC_PREFIX \(50 characters\) longer than the 249 characters Kafka allows/],
  // The dispatcher would write executions into the received topic; Kafka refuses the second creation.
  [{ EXECUTION_QUEUE_AS2: 'ingress.received.v1' }, /^EXECUTION_QUEUE_AS2="ingress.received.v1": is the pipeline topic ingress.received.v1; an execution queue needs a topic of its own$/],
  [{ EXECUTION_QUEUE_AS2: 'ingress_decoded_v1', INGRESS_TOPIC_PREFIX: 'stg.' }, /^EXECUTION_QUEUE_AS2="ingress_decoded_v1": collides with the pipeline topic stg.ingress.decoded.v1 \(Kafka refuses names that differ only by "." and "_"\)$/],
  [{ EXECUTION_QUEUE_AS2: 'executions_requested_v1' }, /^EXECUTION_QUEUE_AS2="executions_requested_v1": collides with the execution queue executions.requested.v1 /],
  [{ AS2_ALLOW_MD5: 'yes' }, /^AS2_ALLOW_MD5="yes": true or false$/],
  [{ CERT_EXPIRY_WARNING_DAYS: '-1' }, /^CERT_EXPIRY_WARNING_DAYS="-1": how many days before a credential certificate expires .* \(a whole number from 0 to 3650\)$/],
  [{ CERT_EXPIRY_WARNING_DAYS: '30d' }, /^CERT_EXPIRY_WARNING_DAYS="30d"/],
  [{ MAX_INFLATION_RATIO: '0' }, /^MAX_INFLATION_RATIO="0": how many times its compressed size a webhook body may inflate to, past its first MiB \(1032, deflate's most, turns the ratio off\) \(a whole number from 2 to 1032\)$/],
  [{ MAX_INFLATION_RATIO: '5000' }, /^MAX_INFLATION_RATIO="5000": .*\(a whole number from 2 to 1032\)$/],
  [{ MAX_INFLATION_RATIO: '100x' }, /^MAX_INFLATION_RATIO="100x"/],
  [{ MAX_HELD_BODY_BYTES: '1MiB', INLINE_BODY_MAX: '768KiB' }, /^MAX_HELD_BODY_BYTES=1048576: at least twice INLINE_BODY_MAX \(786432\) plus 64KiB/],
])('%j is refused with one clear line', (env, line) => {
  const found = problems(env as Record<string, string>);
  expect(found).toHaveLength(1);
  expect(found[0]).toMatch(line);
});

test('every problem is reported at once, and no secret is echoed', () => {
  const found = problems({ PORT: 'x', LOG_LEVEL: 'y', AZURE_STORAGE_CONNECTION_STRING: 'AccountKey=supersecret', INGRESS_ENCRYPTION_KEY: 'tiny-secret' });
  expect(found).toHaveLength(4);
  expect(found.join('\n')).not.toMatch(/supersecret|tiny-secret/);
  // A Cosmos DB connection string where the endpoint belongs: refused, its key not repeated.
  const cosmos = problems({ COSMOS_ENDPOINT: 'AccountEndpoint=https://a.documents.azure.com:443/;AccountKey=cosmossecret==;', COSMOS_KEY: 'x' });
  expect(cosmos).toEqual([expect.stringMatching(/^COSMOS_ENDPOINT is not an http:\/\/ or https:\/\/ URL/)]);
  expect(cosmos.join('\n')).not.toContain('cosmossecret');
});

test('operations settings: admin port, shutdown grace, back-pressure and topic settings', () => {
  expect(loadConfig({})).toMatchObject({
    adminPort: 8081, shutdownGraceMs: 25_000, maxPendingAccepts: 2000, maxPendingAcceptBytes: 64 * 1024 * 1024,
    topicSettings: { partitions: 6, replicationFactor: 3, minInsyncReplicas: 2, retentionHours: 168, deadLetterRetentionHours: 720 },
  });
  expect(loadConfig({ ADMIN_PORT: '0' }).adminPort).toBeNull();
  // min.insync.replicas follows a lowered replication factor unless set; set above it, it is refused.
  expect(loadConfig({ KAFKA_REPLICATION_FACTOR: '1' }).topicSettings.minInsyncReplicas).toBe(1);
  expect(problems({ KAFKA_REPLICATION_FACTOR: '1', KAFKA_MIN_INSYNC_REPLICAS: '2' })).toHaveLength(1);
  expect(problems({ ADMIN_PORT: '8080' })).toEqual(['ADMIN_PORT=8080: must differ from PORT']);
  expect(problems({ SHUTDOWN_GRACE_MS: '-1', MAX_PENDING_ACCEPTS: '0' })).toEqual([
    'SHUTDOWN_GRACE_MS="-1": how long a graceful shutdown may take, in milliseconds (a whole number from 1000 to 3600000)',
    'MAX_PENDING_ACCEPTS="0": how many accepts may wait for the log before the receiver answers 503 (a whole number from 1 to 1000000)',
  ]);
});

test('SHUTDOWN_GRACE_MS below a second is refused: 0 or a few ms cut every stop and exited 1', () => {
  for (const value of ['0', '1', '999']) {
    expect(problems({ SHUTDOWN_GRACE_MS: value })).toEqual([`SHUTDOWN_GRACE_MS="${value}": how long a graceful shutdown may take, in milliseconds (a whole number from 1000 to 3600000)`]);
  }
  expect(loadConfig({ SHUTDOWN_GRACE_MS: '1000' }).shutdownGraceMs).toBe(1000);
});

test('slow bodies: idle time and minimum rate, with their bounds', () => {
  expect(loadConfig({})).toMatchObject({ bodyIdleMs: 60_000, bodyMinBytesPerSecond: 240 });
  expect(loadConfig({ BODY_MIN_BYTES_PER_SECOND: '0' }).bodyMinBytesPerSecond).toBe(0);
  expect(problems({ BODY_IDLE_TIMEOUT_MS: '50', BODY_MIN_BYTES_PER_SECOND: 'fast' })).toEqual([
    'BODY_IDLE_TIMEOUT_MS="50": how long a request body may send nothing before it is given up, in milliseconds (a whole number from 100 to 300000)',
    'BODY_MIN_BYTES_PER_SECOND="fast": the slowest a request body may arrive on average, in bytes per second (0: no minimum) (a whole number from 0 to 1048576)',
  ]);
});

test('the longest idempotency window: 72 hours by default (less when the topics keep records for less), never longer than the topics keep them', () => {
  expect(loadConfig({}).idempotencyMaxWindowHours).toBe(72);
  expect(loadConfig({ IDEMPOTENCY_MAX_WINDOW_HOURS: '240', KAFKA_RETENTION_HOURS: '0' }).idempotencyMaxWindowHours).toBe(240);
  expect(problems({ IDEMPOTENCY_MAX_WINDOW_HOURS: '200' })).toEqual([expect.stringMatching(/^IDEMPOTENCY_MAX_WINDOW_HOURS=200: at most KAFKA_RETENTION_HOURS \(168\)/)]);
  expect(problems({ IDEMPOTENCY_MAX_WINDOW_HOURS: '0' })).toEqual([expect.stringMatching(/^IDEMPOTENCY_MAX_WINDOW_HOURS/)]);
  // A shorter retention lowers the default instead of refusing to start.
  expect(loadConfig({ KAFKA_RETENTION_HOURS: '48' }).idempotencyMaxWindowHours).toBe(48);
});

test('AS2 asynchronous MDN retries: a window in hours and three ascending delays, each refused precisely', () => {
  expect(loadConfig({}).as2MdnRetry).toEqual({ windowMs: 24 * 3_600_000, delaysMs: [30_000, 300_000, 1_800_000], firstAttemptDelayMs: 30_000 });
  expect(loadConfig({ AS2_MDN_RETRY_HOURS: '0.5', AS2_MDN_RETRY_DELAYS: '100ms, 2s,1.5m', AS2_MDN_FIRST_ATTEMPT_DELAY: '250ms' }).as2MdnRetry)
    .toEqual({ windowMs: 1_800_000, delaysMs: [100, 2000, 90_000], firstAttemptDelayMs: 250 });
  expect(problems({ AS2_MDN_RETRY_HOURS: '0' })).toEqual([expect.stringMatching(/^AS2_MDN_RETRY_HOURS="0": how long an asynchronous MDN's delivery is retried .*\(a number above 0 and at most 8760/)]);
  expect(problems({ AS2_MDN_RETRY_HOURS: '1d' })).toEqual([expect.stringMatching(/^AS2_MDN_RETRY_HOURS="1d": /)]);
  expect(problems({ AS2_MDN_RETRY_HOURS: '200', KAFKA_RETENTION_HOURS: '168' })).toEqual(['AS2_MDN_RETRY_HOURS=200: at most KAFKA_RETENTION_HOURS (168), or a retry record could be deleted before it is due']);
  expect(problems({ AS2_MDN_RETRY_DELAYS: '30s,5m' })).toEqual(['AS2_MDN_RETRY_DELAYS="30s,5m": three comma-separated durations (one per retry topic), e.g. 30s,5m,30m; got 2']);
  expect(problems({ AS2_MDN_RETRY_DELAYS: '30,5m,2d' })).toEqual(['AS2_MDN_RETRY_DELAYS="30,5m,2d": each a duration from 10ms to 24h with a unit (ms, s, m, h), e.g. 30s,5m,30m; bad: 30, 2d']);
  expect(problems({ AS2_MDN_RETRY_DELAYS: '5m,30s,30m' })).toEqual(['AS2_MDN_RETRY_DELAYS="5m,30s,30m": durations in ascending order (the first retry comes soonest)']);
  expect(problems({ AS2_MDN_FIRST_ATTEMPT_DELAY: '2h' })).toEqual([expect.stringMatching(/^AS2_MDN_FIRST_ATTEMPT_DELAY="2h": how long after its message was appended .* from 0ms to 1h/)]);
  expect(problems({ AS2_MDN_FIRST_ATTEMPT_DELAY: '30' })).toEqual([expect.stringMatching(/^AS2_MDN_FIRST_ATTEMPT_DELAY="30": /)]);
  // Found by config-fuzz.test.ts: a fraction of a millisecond made a retry's due time no Avro long, and a window
  // too small for a millisecond rounded to 0.
  expect(loadConfig({ AS2_MDN_RETRY_DELAYS: '10.5ms,1.0004s,0.0205m' }).as2MdnRetry.delaysMs).toEqual([11, 1000, 1230]);
  expect(problems({ AS2_MDN_RETRY_HOURS: '0.0000001' })).toEqual([expect.stringMatching(/^AS2_MDN_RETRY_HOURS="0.0000001": .*at least a millisecond/)]);
});

test('the request journal: retention, refusal budget and trace link, each checked', () => {
  expect(loadConfig({}).journal).toEqual({ retentionDays: 30, refusedPerMinute: 60, traceUrl: null });
  expect(loadConfig({ JOURNAL_RETENTION_DAYS: '7', JOURNAL_REFUSED_PER_MINUTE: '0', JOURNAL_TRACE_URL: 'http://jaeger:16686/trace/{traceId}' }).journal)
    .toEqual({ retentionDays: 7, refusedPerMinute: 0, traceUrl: 'http://jaeger:16686/trace/{traceId}' });
  expect(problems({ JOURNAL_RETENTION_DAYS: '0' })).toEqual([expect.stringMatching(/^JOURNAL_RETENTION_DAYS="0": days the request journal keeps an entry/)]);
  expect(problems({ JOURNAL_TRACE_URL: 'http://jaeger:16686/trace/' })).toEqual([expect.stringMatching(/^JOURNAL_TRACE_URL=.*with \{traceId\}/)]);
  expect(problems({ JOURNAL_TRACE_URL: 'javascript:{traceId}' })).toHaveLength(1);
});

test('the OpenTelemetry exporters the SDK knows are accepted, alone or together; OTEL_SDK_DISABLED in any case', () => {
  for (const env of <Record<string, string>[]>[{ OTEL_TRACES_EXPORTER: 'otlp, console' }, { OTEL_TRACES_EXPORTER: 'zipkin' }, { OTEL_TRACES_EXPORTER: 'none' },
    { OTEL_METRICS_EXPORTER: 'prometheus,otlp' }, { OTEL_METRICS_EXPORTER: 'none' }, { OTEL_SDK_DISABLED: 'TRUE' }, { OTEL_SDK_DISABLED: 'false' }]) {
    expect(problems(env)).toEqual([]);
  }
});

test('every variable configuration.md names, given garbage, is read or refused as a ConfigError naming a variable; nothing else is thrown', () => {
  const documented = [...readFileSync(path.join(__dirname, '../../docs/configuration.md'), 'utf8').matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((m) => m[1]);
  expect(documented.length).toBeGreaterThan(50);
  const garbage = ['', ' ', 'x', '-1', '0', '1e309', '99999999999999999999', 'NaN', '\u0000', 'ü'.repeat(300), '../../etc', 'http://', ',,,', '{}'];
  const names = new RegExp(documented.join('|'));
  for (const name of documented) {
    for (const value of garbage) {
      let outcome: unknown;
      try { outcome = loadConfig({ [name]: value }); } catch (error) { outcome = error; }
      if (outcome instanceof Error) {
        if (!(outcome instanceof ConfigError)) throw new Error(`${name}=${JSON.stringify(value)} threw ${outcome.name}: ${outcome.message}`);
        expect(outcome.problems.length).toBeGreaterThan(0);
        for (const problem of outcome.problems) expect(problem).toMatch(names);
      } else expect(outcome).toEqual(expect.objectContaining({ dataDir: expect.any(String) }));
    }
  }
});

test('REPLAY_LANDING_WINDOW_MS: a minute by default, whole milliseconds from 1000, refused otherwise', () => {
  expect(loadConfig({}).replayLandingWindowMs).toBe(60_000);
  expect(loadConfig({ REPLAY_LANDING_WINDOW_MS: '5000' }).replayLandingWindowMs).toBe(5_000);
  expect(problems({ REPLAY_LANDING_WINDOW_MS: '500' })).toEqual([
    'REPLAY_LANDING_WINDOW_MS="500": how long after a died replay run\'s announced batch a rerun on Kafka waits before it looks for the copies that landed, in milliseconds (a whole number from 1000 to 3600000)',
  ]);
});
