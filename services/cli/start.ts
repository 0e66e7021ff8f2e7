import { defaultAvroCodec } from '../platform/avro/codec';
import { ConfigError, type Config } from '../platform/config/config';
import type { StageHandle } from '../platform/log/event-log';
import { startTogether } from '../platform/log/start-together';
import { pipelineTopics } from '../platform/log/topics';
import type { Logger } from '../platform/logger/logger';
import { createTtlCache } from '../platform/registry/ttl-cache';
import { createReceiver, type Receiver } from '../receiver/receiver';
import { createAcceptGate } from '../receiver/accept-gate';
import { createAcceptTiming } from '../receiver/accept-timing';
import { idleBodies } from '../receiver/idle-bodies';
import { startDecoder } from '../decoder/decoder';
import { startDispatcher } from '../dispatcher/dispatcher';
import { samplerGroup, startSampler } from '../sampler/sampler';
import { mdnGroup, startMdnStage } from '../mdn/mdn-stage';
import { journalInputs, startJournal } from '../journal/journal-stage';
import { beginThreadLife, crashMarksIn, markStopping } from '../platform/log/crash-guard';
import { createRefusalJournal, type RefusalJournal } from '../receiver/refusal-journal';
import { createTriggerCatalog, type TriggerCatalog } from '../triggers/catalog';
import { createWebhookTrigger, DEFAULT_WEBHOOK_LIMITS } from '../triggers/webhook/webhook-trigger';
import { createLogisticsTrigger, DEFAULT_LOGISTICS_LIMITS, type LogisticsLimits } from '../triggers/logistics/logistics-trigger';
import { createWarehouseTrigger, DEFAULT_WAREHOUSE_LIMITS } from '../triggers/warehouse/warehouse-trigger';
import { webhookParameters } from '../triggers/webhook/parameters';
import { createAs2Trigger, DEFAULT_AS2_LIMITS } from '../triggers/as2/as2-trigger';
import { allowListEntryListed } from '../triggers/as2/async-mdn';
import type { MdnDelivery } from '../platform/avro/records';
import { byProtocol } from '../triggers/by-protocol';
import { heldBytes, type HeldBytes } from '../triggers/held-bytes';
import type { WorkflowDocument } from '../platform/registry/documents';
import { openedCredentials } from '../platform/registry/opened-credentials';
import type { Backends } from './backends';
import { checkTopics } from './pipeline-topics';
import { createIngressMetrics, type IngressMetrics } from '../platform/telemetry/metrics';
import { createAdmissionGuards, standaloneAdmissionGuards, withAdmissionGuards, type AdmissionGuards } from '../triggers/webhook/admission-guards';
import { createRateLimiter } from '../triggers/rate-limiter';
import { listenFailure, type ReadinessCheck } from '../platform/health/admin-server';
import { watchCertificateExpiry, type CertificateExpiryWatch } from '../platform/registry/certificate-expiry';

/** How long a stop waits for the crash marks to say `stopped` (markStopping) before it goes on. */
const STOP_MARK_WAIT_MS = 2_000;

export const SERVICES = ['receiver', 'decoder', 'dispatcher', 'sampler', 'journal', 'mdn'] as const;
export type ServiceName = (typeof SERVICES)[number];

export interface RunningServices {
  /** The receiver's port, when it runs. */
  port: number | null;
  /** What /readyz checks: the backends answer, the receiver listens, every stage is a member of its group. */
  readiness: ReadinessCheck[];
  /**
   * Stop accepting, let requests in flight finish (up to `receiverGraceMs`), then stop the stages (they commit).
   * `deadline` (epoch ms) is when the whole shutdown must be over: a stage thread bounds its telemetry flush by it.
   */
  stop(receiverGraceMs?: number, deadline?: number): Promise<void>;
  /** Settles when services that run beside this thread (stage-thread.ts) have stopped unexpectedly. */
  failed?: Promise<Error>;
}

/** For services started in a worker thread beside a receiver (stage-thread.ts). */
export interface StartOptions {
  /** The metrics to record to; by default this thread's instruments. */
  metrics?: IngressMetrics;
  /** Whether this process's certificate watch runs here (default: when a receiver or decoder does). */
  watchCertificates?: boolean;
  /** The memory budget of held bodies (MAX_HELD_BODY_BYTES); by default a new one. A test passes its own to see what is held. */
  heldBodies?: HeldBytes;
}

/**
 * Every trigger kind of this build, bounded by the configuration. `guards`: the webhook allow-lists and
 * rate limits, with this process's buckets (one set per receiver; `workflows put` only validates).
 */
export function triggerCatalog(config: Config, held: HeldBytes = heldBytes(config.maxHeldBodyBytes), guards: AdmissionGuards = standaloneAdmissionGuards()): TriggerCatalog {
  const http = createWebhookTrigger({
    ...DEFAULT_WEBHOOK_LIMITS,
    maxInflatedBytes: config.maxInflatedBytes,
    maxInflationRatio: config.maxInflationRatio,
    maxInMemoryBytes: Math.min(config.maxInflatedBytes, DEFAULT_WEBHOOK_LIMITS.maxInMemoryBytes),
    maxFormFields: config.maxFormFields,
    multipart: { ...DEFAULT_WEBHOOK_LIMITS.multipart, ...config.multipart },
  }, guards, held);
  const as2 = withAdmissionGuards(createAs2Trigger({ ...DEFAULT_AS2_LIMITS, maxInflatedBytes: config.maxInflatedBytes, maxMessageBytes: config.maxBodyBytes, allowMd5: config.as2AllowMd5 }, held), guards);
  return createTriggerCatalog([
    byProtocol('webhook', (node) => (webhookParameters(node).protocol === 'as2' ? as2 : http)),
    // On Kafka receivers may be replicas: they share the digest tokens they have seen through the object store.
    createLogisticsTrigger(logisticsLimits(config), held, { sharedNonces: config.kafka !== null }),
    createWarehouseTrigger({ maxPostBytes: Math.min(config.maxBodyBytes, DEFAULT_WAREHOUSE_LIMITS.maxPostBytes) }, held),
  ]);
}

/** The logistics trigger's per-request bounds: its own defaults, lowered further by the service-wide limits. */
export function logisticsLimits(config: Config): LogisticsLimits {
  return {
    ...DEFAULT_LOGISTICS_LIMITS,
    maxInflatedBytes: Math.min(config.maxInflatedBytes, DEFAULT_LOGISTICS_LIMITS.maxInflatedBytes),
    maxEnvelopeBytes: Math.min(config.maxBodyBytes, DEFAULT_LOGISTICS_LIMITS.maxEnvelopeBytes),
  };
}

/**
 * Refuse to start when credentials exist that this process could not open (SPEC: fail closed, say why). A key
 * that is missing, or opens none of them, is the variable's fault (status 78, as configuration.md says); a key
 * that opens some but not others is not, and the message says what else it can be.
 */
export async function checkCredentialsReadable(backends: Backends, logger: Logger): Promise<void> {
  const stored = await backends.registry.credentials.list();
  if (stored.length === 0) return;
  if (!backends.sealer) throw new ConfigError([`INGRESS_ENCRYPTION_KEY is not set, but ${stored.length} credential(s) exist; set the key they were stored with`]);
  const unreadable: string[] = [];
  const previous: string[] = [];
  for (const c of stored) {
    try { if (backends.sealer.sealedWithPrevious(c)) previous.push(c.id); } catch { unreadable.push(c.id); }
  }
  // Opened with the previous key: readable, so no reason to stop, but the rotation is not finished.
  if (previous.length) logger.warn('credentials sealed under the previous key', { event: 'credentials.previous-key', count: previous.length, credentialIds: previous.slice(0, 10), action: 'run ingress credentials reseal, then unset INGRESS_ENCRYPTION_KEY_PREVIOUS' });
  if (unreadable.length === 0) return;
  const named = idList(unreadable);
  if (unreadable.length === stored.length) throw new ConfigError([`INGRESS_ENCRYPTION_KEY does not open credential(s) ${named} (none of the ${stored.length} stored); set the key they were stored with (after a rotation, the old one as INGRESS_ENCRYPTION_KEY_PREVIOUS)`]);
  throw new Error(`INGRESS_ENCRYPTION_KEY does not open credential(s) ${named}, though it opens the other ${stored.length - unreadable.length}: they were stored under another key, or changed on disk; set that key as INGRESS_ENCRYPTION_KEY_PREVIOUS and run ingress credentials reseal, or put each again with this key (ingress credentials put FILE)`);
}

const idList = (ids: string[]) => ids.slice(0, 10).join(', ') + (ids.length > 10 ? ` and ${ids.length - 10} more` : '');

export async function startServices(config: Config, backends: Backends, services: readonly ServiceName[], logger: Logger, options: StartOptions = {}): Promise<RunningServices> {
  const codec = defaultAvroCodec();
  // After startTelemetry: the global meter provider is the SDK's when OTEL_* asks for an exporter, else a no-op.
  const metrics = options.metrics ?? createIngressMetrics();
  // One budget for the bodies held in memory, by the receiver while it reads them and by the triggers
  // that keep them whole (whole-body.ts) or read a staged one back whole (a Standard Webhooks v1a signature):
  // a body held by both counts twice, which errs on the safe side.
  const heldBodies = options.heldBodies ?? heldBytes(config.maxHeldBodyBytes);
  const catalog = triggerCatalog(config, heldBodies, createAdmissionGuards({ limiter: createRateLimiter(), metrics }));
  const topics = pipelineTopics(config.topicPrefix);
  const queues = [...new Set(Object.values(config.executionQueues))];
  await checkTopics(config, backends.log);
  // The decoder opens AS2 credentials again (as2.md, "Where the work happens"), and the mdn stage reads their
  // allow-lists: a process of either that could not would dead-letter, or give up on, what receivers accepted.
  if (services.some((s) => s === 'receiver' || s === 'decoder' || s === 'mdn')) await checkCredentialsReadable(backends, logger);

  const stages: { name: ServiceName; handle: StageHandle }[] = [];
  let receiver: Receiver | null = null;
  let refusals: RefusalJournal | null = null;
  let port: number | null = null;
  try {
    // The registry as the stages read it now, cached for WORKFLOW_CACHE_MS (the receiver keeps caches of its own).
    const workflows = createTtlCache<WorkflowDocument>((id) => backends.registry.workflows.get(id), config.workflowCacheMs);
    const credentials = openedCredentials(backends.registry, backends.sealer, config.workflowCacheMs);
    // A record that ends the process handling it is found after a few restarts and dead-lettered (crash-guard.ts).
    const crashMarks = crashMarksIn(backends.store);
    beginThreadLife();
    const starts: { name: ServiceName; start: () => Promise<StageHandle> }[] = [];
    if (services.includes('decoder')) {
      // AS2 bodies are opened again by the decoder, with the credential as it is now (docs/as2.md, "Where the work happens").
      starts.push({ name: 'decoder', start: () => startDecoder({ log: backends.log, topics, codec, store: backends.store, workflows, catalog, credential: (id) => credentials.get(id), logger: logger.child({ service: 'decoder' }), metrics, recordKey: config.recordKey, idempotencyLookbackMs: config.idempotencyMaxWindowHours * 3_600_000, mdnFirstAttemptDelayMs: config.as2MdnRetry.firstAttemptDelayMs, crashMarks }) });
    }
    if (services.includes('dispatcher')) {
      starts.push({ name: 'dispatcher', start: () => startDispatcher({ log: backends.log, topics, codec, logger: logger.child({ service: 'dispatcher' }), metrics, executionQueues: config.executionQueues, recordKey: config.recordKey, crashMarks }) });
    }
    if (services.includes('sampler')) {
      starts.push({ name: 'sampler', start: () => startSampler({ log: backends.log, topics, codec, samples: backends.registry.samples, logger: logger.child({ service: 'sampler' }), metrics, queues, keep: config.sampleDataKeep, recordKey: config.recordKey, crashMarks }) });
    }
    if (services.includes('mdn')) {
      // Each attempt checks that its allow-list entry is still listed: removing one stops the retries queued for it.
      const stillAllowed = (d: MdnDelivery) => allowListEntryListed(d.workflowId, d.allowedBy, { workflow: (id) => workflows.get(id), credential: (id) => credentials.get(id) });
      starts.push({ name: 'mdn', start: () => startMdnStage({ log: backends.log, topics, codec, store: backends.store, logger: logger.child({ service: 'mdn' }), metrics, retry: config.as2MdnRetry, recordKey: config.recordKey, stillAllowed, crashMarks }) });
    }
    if (services.includes('journal')) {
      starts.push({ name: 'journal', start: () => startJournal({ log: backends.log, topics, codec, journal: backends.registry.journal, logger: logger.child({ service: 'journal' }), metrics, queues, retentionDays: config.journal.retentionDays, crashMarks }) });
    }
    // Together: on Kafka each stage's start waits for its groups' joins, so one after another they added up (start-together.ts).
    // As safe on the embedded log: its runStage claims the group and topic before it first awaits, and every append
    // goes through the journal's one writer (from a stage worker, by the main thread: log-host.ts), in any order.
    const handles = await startTogether(starts.map(({ start }) => start));
    stages.push(...starts.map(({ name }, i) => ({ name, handle: handles[i] })));
    if (services.includes('receiver')) {
      refusals = createRefusalJournal({ log: backends.log, topic: topics.refused, codec, logger: logger.child({ service: 'receiver' }), metrics, perMinute: config.journal.refusedPerMinute });
      receiver = createReceiver({
        log: backends.log, topics, store: backends.store, registry: backends.registry, sealer: backends.sealer, catalog, codec,
        logger: logger.child({ service: 'receiver' }), maxBodyBytes: config.maxBodyBytes, inlineBodyMax: config.inlineBodyMax, workflowCacheMs: config.workflowCacheMs, redactQueryParams: config.redactQueryParams,
        acceptGate: createAcceptGate({ maxPending: config.maxPendingAccepts, maxPendingBytes: config.maxPendingAcceptBytes }),
        acceptTiming: createAcceptTiming(), heldBodies, idleBodies: idleBodies(config.bodyIdleMs, config.bodyMinBytesPerSecond), metrics, recordKey: config.recordKey, refusals,
      });
      port = await receiver.listen(config.port, config.host).catch((error: NodeJS.ErrnoException) => {
        throw listenFailure(error, { portVariable: 'PORT', hostVariable: 'HOST', port: config.port, host: config.host });
      });
    }
  } catch (error) {
    await receiver?.close();
    await refusals?.close();
    for (const s of stages) await s.handle.stop().catch(() => undefined);
    throw error;
  }
  // Each stage's input topics, with the group that commits them (the sampler has one group per queue).
  const inputs: Record<string, { topic: string; group: string }[]> = {
    decoder: [{ topic: topics.received, group: topics.group('decoder') }],
    dispatcher: [{ topic: topics.decoded, group: topics.group('dispatcher') }],
    sampler: queues.map((topic) => ({ topic, group: samplerGroup(topics, topic) })),
    mdn: [topics.mdnDeliveries, ...topics.mdnRetries].map((topic) => ({ topic, group: mdnGroup(topics, topic) })),
    journal: journalInputs(topics, queues),
  };
  const stopObservingLag = metrics.observeLag(async () => (await Promise.all(stages.flatMap(({ name }) => inputs[name].map(async ({ topic, group }) => ({
    stage: name, topic, lag: await backends.log.consumerLag(group, topic),
  }))))));
  // The processes that open credentials watch their certificates: the gauge, and a warning a day (docs/as2.md, "Certificate expiry").
  let certificates: CertificateExpiryWatch | null = null;
  let stopObservingCertificates: () => void = () => undefined;
  if (backends.sealer && (options.watchCertificates ?? (services.includes('receiver') || services.includes('decoder')))) {
    certificates = watchCertificateExpiry({ registry: backends.registry, sealer: backends.sealer, logger, warningDays: config.certExpiryWarningDays });
    const watch = certificates;
    stopObservingCertificates = metrics.observeCertificates(() => watch.certificates());
    watch.start();
  }
  const listening = receiver;
  const readiness: ReadinessCheck[] = [
    { name: 'log', check: async () => { await backends.log.missingTopics([topics.received]); return null; } },
    { name: 'store', check: async () => { await backends.store.head('readyz'); return null; } },
    { name: 'registry', check: async () => { await backends.registry.workflows.get('readyz'); return null; } },
    ...stages.map(({ name, handle }) => ({ name, check: () => handle.notReady() })),
    ...(listening ? [{ name: 'receiver', check: () => (listening.server.listening ? null : 'not listening') }] : []),
  ];
  return {
    port,
    readiness,
    async stop(receiverGraceMs) {
      // What the stages hold when the grace may cut them short is marked stopped: not a crash (crash-guard.ts).
      // Written while the receiver drains, not before it closes: it takes no new connection from this instant.
      // Bounded: a store that does not answer leaves the end counted as a crash, and the stop goes on.
      const marked = stages.length > 0 ? Promise.race([markStopping(), new Promise((resolve) => setTimeout(resolve, STOP_MARK_WAIT_MS).unref())]) : null;
      certificates?.stop();
      stopObservingCertificates();
      // Stop taking requests first, so everything answered 200 is in the log before the stages stop.
      await receiver?.close(receiverGraceMs);
      await refusals?.close();
      await marked;
      for (const s of stages) await s.handle.stop();
      // Stopped stages have no lag to report; services started again (a stage worker's successor) register their own.
      stopObservingLag();
    },
  };
}
