import { metrics, type Attributes, type Meter, type ObservableCallback } from '@opentelemetry/api';
import { HOOK_ROUTE, type HttpShape } from './http-semconv';

/**
 * The service's metrics, through the OpenTelemetry metrics API. The instruments come from the global meter
 * provider at the time the services start: with no SDK (no OTEL_* exporter asked for) that is the API's no-op
 * meter, and recording costs one empty call. Names follow the semantic conventions where there is one
 * (http.server.request.duration, messaging.*), `ingress.*` otherwise.
 */
export interface IngressMetrics {
  /**
   * One hook request answered: its status, its trigger kind (none when no workflow matched), how long, how
   * many body bytes, and what the answer said beyond its status when the kind says more (AS2 dispositions).
   */
  request(status: number, triggerKind: string | null, seconds: number, bodyBytes: number, outcome: string | undefined, http: HttpShape): void;
  /**
   * One request the HTTP parser refused before it was whole (a bad header line, a bad chunk size), answered raw:
   * counted in `ingress.requests` (trigger kind none), so a flood of them shows. It has no duration: neither its
   * method nor when it began is known.
   */
  refusedByParser(status: number): void;
  /**
   * One input record a stage finished: processed, dead-lettered with an error code, or skipped with the reason
   * (a stage without dead letters, the journal, passing over a record it must not or cannot handle:
   * `stage-crashed`, a record that ended the process handling it, or `unreadable`, one it cannot decode).
   */
  stageRecord(stage: string, outcome: 'processed' | 'dead-lettered' | 'skipped', errorCode?: string): void;
  /** A hook request refused with 429 rate-limited, by workflow. */
  rateLimited(workflowId: string): void;
  /** A hook request refused with 403 ip-not-allowed, by workflow. */
  ipNotAllowed(workflowId: string): void;
  /** A request repeating an accepted idempotency key: the decoder requested no execution for it. */
  duplicate(workflowId: string): void;
  /** One attempt to deliver an asynchronous AS2 MDN, by what it came to (delivered, retrying, given_up). */
  mdnDelivery(outcome: 'delivered' | 'retrying' | 'given_up'): void;
  /** A refused request the request journal did not get a record of: over its workflow's budget, the queue full, or the append failed. */
  refusalNotJournaled(reason: 'rate-limited' | 'queue-full' | 'append-failed', count?: number): void;
  /**
   * Report consumer lag (records behind, per stage and topic) whenever metrics are collected, until the returned
   * function is called: whoever registers `read` stops it when what it reads goes away (a stage worker that
   * ended), or every collection would go on asking the dead one, and a process would gather one per restart.
   */
  observeLag(read: () => Promise<{ stage: string; topic: string; lag: number }[]>): () => void;
  /** Report each certificate's days to expiry (negative once expired) whenever metrics are collected, until the returned function is called. */
  observeCertificates(read: () => Promise<{ credentialId: string; role: string; fingerprint: string; daysToExpiry: number }[]>): () => void;
}

export function createIngressMetrics(meter: Meter = metrics.getMeter('inbound-event-ingress')): IngressMetrics {
  const requests = meter.createCounter('ingress.requests', { description: 'Requests answered (those the HTTP parser refused included), by status and trigger kind', unit: '{request}' });
  const duration = meter.createHistogram('http.server.request.duration', {
    description: 'Time to answer a hook request (the durable accept included)', unit: 's',
    advice: { explicitBucketBoundaries: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] },
  });
  const bytesIn = meter.createCounter('ingress.request.body.size', { description: 'Body bytes received by hook requests that reached a trigger', unit: 'By' });
  const outcomes = meter.createCounter('ingress.answer.outcomes', { description: 'Answers by what they said beyond the status (AS2 dispositions), by trigger kind', unit: '{request}' });
  const outcomeAttributes = new Map<string, Attributes>();
  const stageRecords = meter.createCounter('ingress.stage.records', { description: 'Input records a stage finished, by outcome', unit: '{record}' });
  const deadLetters = meter.createCounter('ingress.dead_letters', { description: 'Records sent to the dead-letter topic, by stage and error code', unit: '{record}' });
  const rateLimited = meter.createCounter('ingress.rate_limited', { description: 'Hook requests refused by a rate limit (429), by workflow', unit: '{request}' });
  const ipNotAllowed = meter.createCounter('ingress.ip_not_allowed', { description: 'Hook requests refused by an IP allow-list (403), by workflow', unit: '{request}' });
  const duplicates = meter.createCounter('ingress.duplicates', { description: 'Requests that repeated an accepted idempotency key within the window, so started nothing, by workflow', unit: '{request}' });
  const mdnDeliveries = meter.createCounter('ingress.as2.mdn_deliveries', { description: 'Attempts to deliver an asynchronous AS2 MDN, by outcome (delivered, retrying, given_up)', unit: '{attempt}' });
  const mdnOutcomeAttributes = { delivered: { 'ingress.outcome': 'delivered' }, retrying: { 'ingress.outcome': 'retrying' }, given_up: { 'ingress.outcome': 'given_up' } };
  const refusalsNotJournaled = meter.createCounter('ingress.journal.refusals_not_journaled', { description: 'Refused requests left out of the request journal, by reason (rate-limited: over the per-workflow budget; queue-full; append-failed)', unit: '{request}' });
  const lag = meter.createObservableGauge('messaging.kafka.consumer.lag', { description: 'Records in the stage input topic not yet committed by the stage', unit: '{record}' });
  const certificateDays = meter.createObservableGauge('ingress.certificate.days_to_expiry', { description: 'Whole days until a credential certificate expires (negative once expired), by credential, role and SHA-256 fingerprint', unit: 'd' });
  // The hot path allocates no attribute objects: one set per status, trigger kind, method and route, made once
  // (the methods are a fixed set, httpMethod's: a client's made-up method is `_OTHER`, never a new key).
  const requestAttributes = new Map<string, { count: Attributes; duration: Attributes; bytes: Attributes }>();
  const attributesOf = (status: number, triggerKind: string, http: HttpShape) => {
    const key = `${status} ${triggerKind} ${http.method} ${http.routed ? 1 : 0}`;
    let set = requestAttributes.get(key);
    if (!set) {
      const count = { 'http.response.status_code': status, 'ingress.trigger_kind': triggerKind };
      const duration: Attributes = { 'http.request.method': http.method, 'url.scheme': 'http', ...count };
      if (http.routed) duration['http.route'] = HOOK_ROUTE;
      // The conventions' error.type for a server: set on 5xx only, the status code as a string.
      if (status >= 500) duration['error.type'] = String(status);
      set = { count, duration, bytes: { 'ingress.trigger_kind': triggerKind } };
      requestAttributes.set(key, set);
    }
    return set;
  };
  const parserRefusals = new Map<number, Attributes>();
  return {
    request(status, triggerKind, seconds, bodyBytes, outcome, http) {
      const attributes = attributesOf(status, triggerKind ?? 'none', http);
      requests.add(1, attributes.count);
      duration.record(seconds, attributes.duration);
      if (bodyBytes > 0) bytesIn.add(bodyBytes, attributes.bytes);
      if (outcome !== undefined) {
        const key = `${triggerKind} ${outcome}`;
        let set = outcomeAttributes.get(key);
        if (!set) outcomeAttributes.set(key, (set = { 'ingress.trigger_kind': triggerKind ?? 'none', 'ingress.outcome': outcome }));
        outcomes.add(1, set);
      }
    },
    refusedByParser(status) {
      let set = parserRefusals.get(status);
      if (!set) parserRefusals.set(status, (set = { 'http.response.status_code': status, 'ingress.trigger_kind': 'none' }));
      requests.add(1, set);
    },
    // Refusals are off the accepting path: their attributes are made per call, and no map of workflow ids grows.
    rateLimited: (workflowId) => rateLimited.add(1, { 'workflow.id': workflowId }),
    ipNotAllowed: (workflowId) => ipNotAllowed.add(1, { 'workflow.id': workflowId }),
    stageRecord(stage, outcome, errorCode) {
      // A skip has no dead letter to count it by its code: the reason rides on the record count itself.
      stageRecords.add(1, outcome === 'skipped' ? { 'ingress.stage': stage, 'ingress.outcome': outcome, 'error.type': errorCode ?? 'error' } : { 'ingress.stage': stage, 'ingress.outcome': outcome });
      if (outcome === 'dead-lettered') deadLetters.add(1, { 'ingress.stage': stage, 'error.type': errorCode ?? 'error' });
    },
    refusalNotJournaled: (reason, count = 1) => refusalsNotJournaled.add(count, { 'ingress.reason': reason }),
    duplicate(workflowId) {
      duplicates.add(1, { 'workflow.id': workflowId });
    },
    mdnDelivery(outcome) {
      mdnDeliveries.add(1, mdnOutcomeAttributes[outcome]);
    },
    observeLag(read) {
      const callback: ObservableCallback = async (result) => {
        for (const { stage, topic, lag: value } of await read().catch(() => [])) {
          result.observe(value, { 'ingress.stage': stage, 'messaging.destination.name': topic });
        }
      };
      lag.addCallback(callback);
      return () => lag.removeCallback(callback);
    },
    observeCertificates(read) {
      const callback: ObservableCallback = async (result) => {
        for (const c of await read().catch(() => [])) {
          result.observe(c.daysToExpiry, { 'ingress.credential.id': c.credentialId, 'ingress.certificate.role': c.role, 'ingress.certificate.fingerprint': c.fingerprint });
        }
      };
      certificateDays.addCallback(callback);
      return () => certificateDays.removeCallback(callback);
    },
  };
}
