import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { SpanKind, SpanStatusCode, context, isSpanContextValid, trace, type Attributes, type Span } from '@opentelemetry/api';
import { avroBytesLength, type AvroCodec } from '../platform/avro/codec';
import type { Received } from '../platform/avro/records';
import type { EventLog } from '../platform/log/event-log';
import { IDEMPOTENCY_HEADER, idempotencyIdentity, recordKey, type RecordKeyMode } from '../platform/log/record-keys';
import type { PipelineTopics } from '../platform/log/topics';
import type { Logger } from '../platform/logger/logger';
import { redactHeaders, redactQuery } from '../platform/logger/redact';
import type { WorkflowDocument } from '../platform/registry/documents';
import { DOCUMENT_ID, type Registry } from '../platform/registry/registry';
import type { CredentialSealer } from '../platform/registry/credential-crypto';
import type { ObjectStore } from '../platform/store/object-store';
import { traceHeaders, tracer } from '../platform/telemetry/trace-context';
import { HOOK_ROUTE, OTHER_METHOD, httpShape, type HttpShape } from '../platform/telemetry/http-semconv';
import { BUSY, EMPTY_OK, errorAnswer, looksEmpty, type Answer } from '../triggers/answers';
import type { TriggerCatalog } from '../triggers/catalog';
import type { InboundRequest, Inspection, TriggerServices } from '../triggers/trigger';
import type { HeldBytes } from '../triggers/held-bytes';
import { drainBody, readBody } from './body-reader';
import { parseHookRoute, targetPath, type HookRoute } from './route';
import { createTtlCache } from '../platform/registry/ttl-cache';
import { openedCredentials } from '../platform/registry/opened-credentials';
import type { AcceptGate } from './accept-gate';
import type { AcceptTiming } from './accept-timing';
import type { IdleBodies } from './idle-bodies';
import type { IngressMetrics } from '../platform/telemetry/metrics';
import { acceptedKeys } from './accepted-keys';
import { keepIdleConnections } from '../platform/net/idle-connections';
import type { RefusalJournal } from './refusal-journal';
import { afterAnswer } from '../platform/net/parser-refusal';
import { answered, type InHand } from './in-hand';
import { parserRefusals, rawAnswer } from './parser-refusals';

/**
 * The public front door. It does only what the answer depends on (DESIGN.md §1): resolve the workflow
 * from a cache, select the trigger node, authenticate, read the body under its limit, let the trigger
 * inspect it, make it durable in the received log, then answer. It parses no body and stages no file.
 */
export interface ReceiverDeps {
  log: EventLog;
  topics: PipelineTopics;
  store: ObjectStore;
  registry: Registry;
  sealer: CredentialSealer | null;
  catalog: TriggerCatalog;
  codec: AvroCodec;
  logger: Logger;
  maxBodyBytes: number;
  inlineBodyMax: number;
  workflowCacheMs: number;
  /** Query names whose values never reach the received record, beyond the built-in ones. */
  redactQueryParams: ReadonlySet<string>;
  /** Back-pressure (accept-gate.ts): accepts waiting for the log beyond this are answered 503 at once. */
  acceptGate: AcceptGate;
  /** What bodies may hold in memory at once while they are read, all requests together (body-reader.ts). */
  heldBodies: HeldBytes;
  /** Gives up bodies from which nothing, or too little, arrives for too long (idle-bodies.ts). */
  idleBodies: IdleBodies;
  /** Answers that accept nothing wait about as long as a durable accept (accept-timing.ts). */
  acceptTiming: AcceptTiming;
  metrics: Pick<IngressMetrics, 'request' | 'refusedByParser'>;
  /** What the received record is keyed by (RECORD_KEY, record-keys.ts). */
  recordKey: RecordKeyMode;
  /** Where refusals of existing workflows are noted for the request journal, after the answer (refusal-journal.ts). */
  refusals?: RefusalJournal;
}

/** What a request turned out to be, for its metrics. */
interface RequestFacts {
  triggerKind: string | null;
  bodyBytes: number;
  /** The request's place on its connection (0 for the first): what was read before or after it. */
  seq: number;
  /** An answer owed before this one that may yet close the connection (InHand.undecided): the accept waits for it. */
  undecided: http.ServerResponse | undefined;
  /** Set once an existing workflow's trigger node is selected: only those refusals are journaled. */
  workflowId: string | null;
  triggerNode: string | null;
  receivedAt: number;
  accepted: boolean;
  /** Why nothing was accepted when that was a fault on our side (a 503's or 500's cause), for the span: our own words. */
  failure: { cause: string; error?: unknown } | null;
}

/** What an answer said beyond its status, for the refusal journal: the AS2 outcome, the code it carries (a SOAP Fault's), else the JSON error code. */
const ERROR_CODE = /^\{"error":"([a-z0-9-]{1,64})"/;
function answerCode(answer: Answer): string | null {
  if (answer.outcome !== undefined) return answer.outcome;
  if (answer.code !== undefined) return answer.code;
  return typeof answer.body === 'string' ? ERROR_CODE.exec(answer.body)?.[1] ?? null : null;
}

export interface Receiver {
  readonly server: http.Server;
  listen(port: number, host: string): Promise<number>;
  /**
   * Stop accepting connections, close the idle ones, and end each busy one with the answer to its latest request
   * (`Connection: close`), refusing what arrives after; resolves once the requests in flight are answered, or after
   * `graceMs` cuts what is left.
   */
  close(graceMs?: number): Promise<void>;
}

/** The request as the trigger plugins see it: headers flattened (repeated ones joined), the route's parts. */
function inboundRequest(req: http.IncomingMessage, route: HookRoute, requestId: string): InboundRequest {
  const headers: Record<string, string> = {};
  const incoming = req.headers;
  for (const name in incoming) {
    const value = incoming[name];
    if (value !== undefined) headers[name] = typeof value === 'string' ? value : value.join(', ');
  }
  return {
    requestId, workflowId: route.workflowId, pathSuffix: route.pathSuffix, query: route.query, headers,
    remoteAddress: req.socket.remoteAddress ?? null, receivedAt: Date.now(),
  };
}

const NO_BYTES = Buffer.alloc(0);
const NOT_ASCII = /[^\x00-\x7f]/;
const CHUNKED_ONLY = /^[ \t]*chunked[ \t]*$/i;

/** Where a body goes when it outgrows INLINE_BODY_MAX (most never do). */
const stagingPathOf = (request: InboundRequest) =>
  `raw/${request.workflowId}/${new Date(request.receivedAt).toISOString().slice(0, 10)}/${request.requestId}`;

export function createReceiver(deps: ReceiverDeps): Receiver {
  const { log, store, codec, logger, catalog } = deps;
  const workflows = createTtlCache<WorkflowDocument>((id) => deps.registry.workflows.get(id), deps.workflowCacheMs);
  const credentials = openedCredentials(deps.registry, deps.sealer, deps.workflowCacheMs);
  const services: TriggerServices = { credential: (id) => credentials.get(id), cachedCredential: (id) => credentials.peek(id), store, logger };
  const recentKeys = acceptedKeys();

  /** The `received` record of an accepted request, secrets redacted; its traceparent is the caller's to set. */
  function receivedRecord(request: InboundRequest, triggerNode: string, triggerKind: Received['triggerKind'], body: Received['body'], admission: { principal: string | null; secretHeaders: string[]; callbackUrlHeaders?: readonly string[]; remoteAddress?: string }, as2: Received['as2']): Received {
    return {
      requestId: request.requestId,
      workflowId: request.workflowId,
      triggerNode,
      triggerKind,
      pathSuffix: request.pathSuffix,
      query: redactQuery(request.query, deps.redactQueryParams),
      headers: redactHeaders(request.headers, admission.secretHeaders, admission.callbackUrlHeaders),
      contentType: request.headers['content-type'] ?? null,
      body,
      receivedAt: request.receivedAt,
      principal: admission.principal,
      remoteAddress: admission.remoteAddress ?? request.remoteAddress,
      as2,
      traceparent: null,
      idempotencyKey: null,
      duplicateOf: null,
    };
  }

  /**
   * The size of the record an open webhook (no authentication, default node name) would have made of this
   * request and a body of `bodyBytes`: the same fields, redacted the same way, encoded the same way. An
   * inline body is encoded empty and its bytes counted in, so no body-sized buffer is made or kept for it.
   */
  function wouldBeRecordSize(request: InboundRequest, bodyBytes: number): number {
    const inline = bodyBytes <= deps.inlineBodyMax;
    const body: Received['body'] = inline
      ? { kind: 'inline', data: NO_BYTES }
      : { kind: 'ref', path: stagingPathOf(request), size: bodyBytes, sha256: '0'.repeat(64) };
    const record = receivedRecord(request, 'Webhook', 'webhook', body, { principal: null, secretHeaders: [] }, null);
    record.traceparent = traceHeaders().traceparent ?? null;
    const encoded = codec.encode('Received', record).length;
    return inline ? encoded - avroBytesLength(0) + avroBytesLength(bodyBytes) : encoded;
  }

  /** What each answer said beyond its status, for the request's metrics. */
  const outcomes = new WeakMap<http.ServerResponse, string>();
  /** The code of each answer that was not a plain 200, for the refusal journal. */
  const codes = new WeakMap<http.ServerResponse, string | null>();
  /** Set by close(): from then on a connection's last answer closes it, and new requests are refused (see close). */
  let closeBegun = false;

  /**
   * Status, headers and body in one `writeHead` + `end`. Each of these measurably slows every answer
   * (docs/benchmarks.md), so none is used: a `setHeader` before it, a Buffer body where a string will do
   * (only binary answers, AS2 MDNs, are Buffers), and an object spread to merge the headers.
   */
  function send(res: http.ServerResponse, requestId: string, answer: Answer) {
    if (res.headersSent) return;
    if (answer.outcome !== undefined) outcomes.set(res, answer.outcome);
    if (answer.status >= 400 || answer.outcome !== undefined) codes.set(res, answerCode(answer));
    const headers: Record<string, string> = {};
    let headersNotAscii = false;
    for (const name in answer.headers) {
      const value = answer.headers[name];
      headers[name] = value;
      if (!headersNotAscii && NOT_ASCII.test(value)) headersNotAscii = true;
    }
    headers['content-length'] = String(typeof answer.body === 'string' ? Buffer.byteLength(answer.body) : answer.body.length);
    headers['x-request-id'] = requestId;
    // Only the connection's latest request may close it: an earlier one's answer goes out first, and a close on it
    // would cut off the answers after it, to requests that may be accepted (their records written) by then.
    if (closeBegun && inHand.get(res.req.socket)?.res === res) res.shouldKeepAlive = false;
    res.writeHead(answer.status, headers);
    // Node writes headers as Latin-1, except when they go out in one write with a string body: then both
    // are UTF-8, and a header byte of 0x80 or more (a templated echo of what the partner sent) would be
    // sent as two. A Buffer body is written apart from the headers.
    res.end(headersNotAscii && typeof answer.body === 'string' ? Buffer.from(answer.body) : answer.body);
  }

  /** A body declared (Content-Length) over MAX_BODY_BYTES: it is never read through. */
  const declaredTooLarge = (req: http.IncomingMessage) => Number(req.headers['content-length']) > deps.maxBodyBytes;

  /** Answer without reading the body; keep the connection only if the rest of the body is small. */
  function refuse(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, answer: Answer) {
    // A body declared over the limit is not read through: the connection closes after the answer, which says so.
    if (declaredTooLarge(req)) res.shouldKeepAlive = false;
    send(res, requestId, answer);
    void drainBody(req, deps.maxBodyBytes, { idle: deps.idleBodies }).then(() => {
      if (req.complete) return;
      // Not before this answer is written: the answers owed to requests pipelined before it go out first.
      afterAnswer(res, () => req.socket.destroy());
    });
  }

  /**
   * The place on its connection (RequestFacts.seq) of the first request whose answer closes the connection: one
   * with the rest of its body unread, one that asked for the close (`Connection: close`, HTTP/1.0), a 417. Requests
   * the parser read behind it (pipelined in the same read) are in hand already, but their answers would come after
   * the close: none of them is accepted (see the accept in handle).
   */
  const endingAt = new WeakMap<Socket, number>();
  const endsAt = (socket: Socket, seq: number) => { if (!(seq > (endingAt.get(socket) ?? Infinity))) endingAt.set(socket, seq); };
  /** An answer after which the connection, with the rest of the body unread, is closed. */
  function closing(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, seq: number, answer: Answer): number {
    // The 413 of a body declared too large and cut short by the client is given as the FIN comes (clientError):
    // handle()'s own, once the workflow is looked up, finds it given.
    if (res.headersSent) return answer.status;
    endsAt(req.socket, seq);
    send(res, requestId, answer);
    res.once('finish', () => req.socket.destroy());
    return answer.status;
  }
  const TOO_LARGE = errorAnswer('payload-too-large', `The request body is larger than ${deps.maxBodyBytes} bytes`, { connection: 'close' });
  const tooLarge = (req: http.IncomingMessage, res: http.ServerResponse, requestId: string, seq: number) =>
    closing(req, res, requestId, seq, TOO_LARGE);
  const stalled = (req: http.IncomingMessage, res: http.ServerResponse, requestId: string, seq: number) =>
    closing(req, res, requestId, seq, errorAnswer('request-timeout', undefined, { connection: 'close' }));

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, facts: RequestFacts, route: HookRoute | null): Promise<number> {
    // A request that arrives once close has begun (pipelined, or sent on a kept-alive connection before its last
    // answer said close) is not taken on: the requests in flight are what close waits for.
    if (closeBegun) { facts.failure = STOPPING; refuse(req, res, requestId, BUSY); return BUSY.status; }
    // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400. Node's own check (requireHostHeader, off here)
    // answers it bare and closes the connection while requests read behind it go on to be accepted, unanswered.
    if (lacksHost(req)) return closing(req, res, requestId, facts.seq, NO_HOST);
    if (!route) { refuse(req, res, requestId, errorAnswer('not-found')); return 404; }
    // Before the look-up, so the answer is the same whether the workflow exists or not.
    if (route.dotSegment) { refuse(req, res, requestId, DOT_SEGMENT); return DOT_SEGMENT.status; }
    if (req.method !== 'POST') { refuse(req, res, requestId, errorAnswer('method-not-allowed', undefined, { allow: 'POST' })); return 405; }
    // Node's parser undoes `chunked` only; under `gzip, chunked` the body it hands over is still compressed and
    // would be accepted as if it were the content (RFC 9112 §6.1: a coding the server does not know is a 501).
    // Decided before the workflow is looked up, so the answer is the same whether it exists or not.
    const transferCoding = req.headers['transfer-encoding'];
    if (transferCoding !== undefined && !CHUNKED_ONLY.test(transferCoding)) { refuse(req, res, requestId, errorAnswer('transfer-coding-unsupported')); return 501; }
    trace.getActiveSpan()?.setAttribute('workflow.id', route.workflowId);

    let workflow: WorkflowDocument | null;
    try {
      // An id that cannot exist is simply a missing workflow, answered like any other.
      const cached = workflows.peek(route.workflowId);
      workflow = cached !== undefined ? cached : DOCUMENT_ID.test(route.workflowId) ? await workflows.get(route.workflowId) : null;
    } catch (error) {
      logger.error('registry unavailable', { requestId, error });
      facts.failure = { cause: 'the workflow registry could not be read', error };
      refuse(req, res, requestId, BUSY);
      return 503;
    }
    const selected = workflow && workflow.active ? catalog.select(workflow) : null;
    if (!workflow || !selected) {
      // Read the body as an existing workflow would, take as long as accepting it would have, then the
      // same empty answer whatever the reason. Where an open hook would refuse (the log saturated, a body
      // over the limit or gone silent, the memory budget spent) the answer is the same refusal at the same
      // moment and in the same order, or that answer would tell the two apart.
      if (deps.acceptGate.saturated()) { facts.failure = SATURATED; refuse(req, res, requestId, BUSY); return BUSY.status; }
      if (declaredTooLarge(req)) return tooLarge(req, res, requestId, facts.seq);
      const drained = await drainBody(req, deps.maxBodyBytes, { account: { held: deps.heldBodies, inlineMax: deps.inlineBodyMax }, idle: deps.idleBodies });
      if (drained.outcome === 'too-large') return tooLarge(req, res, requestId, facts.seq);
      if (drained.outcome === 'idle') return stalled(req, res, requestId, facts.seq);
      if (drained.outcome === 'busy') { facts.failure = HELD_FULL; refuse(req, res, requestId, BUSY); return BUSY.status; }
      // An open hook's record enters the accept gate here, and is refused when it would not fit. The record
      // this request would have made, for a webhook node, meets the gate the same way (nothing is held).
      if (!deps.acceptGate.admits(wouldBeRecordSize(inboundRequest(req, route, requestId), drained.bytes))) {
        facts.failure = SATURATED;
        send(res, requestId, BUSY);
        return BUSY.status;
      }
      await deps.acceptTiming.imitate(drained.endedAt, drained.bytes > deps.inlineBodyMax);
      send(res, requestId, EMPTY_OK);
      if (!req.complete) res.once('finish', () => req.socket.destroy()); // the client went away mid-body
      return 200;
    }
    const { node, plugin } = selected;
    facts.triggerKind = plugin.kindOf(node);
    facts.workflowId = workflow.id;
    facts.triggerNode = node.name;

    const request = inboundRequest(req, route, requestId);
    facts.receivedAt = request.receivedAt;
    const { headers } = request;
    if (logger.enabled('info')) logger.info('inbound event', {
      requestId, workflowId: workflow.id, method: req.method, path: targetPath(req.url ?? '/'), contentType: headers['content-type'] ?? null,
      contentLength: headers['content-length'] ?? null, userAgent: headers['user-agent'] ?? null, remoteAddress: request.remoteAddress,
    });

    // Plugins answer at once when they have nothing to wait for; awaiting only real promises keeps
    // microtask hops off the common path (as for `accepted` below).
    const admitting = plugin.admit(request, node, services);
    const admission = admitting instanceof Promise ? await admitting : admitting;
    if (!admission.ok) { refuse(req, res, requestId, admission.answer); return admission.answer.status; }
    /** Nothing was accepted: the kind's own answer (an AS2 failure MDN, a SOAP Fault), else 503. */
    const notAccepted = async (inspection: Inspection): Promise<Answer> =>
      (await plugin.notAccepted?.(request, node, inspection, services)) ?? BUSY;
    if (deps.acceptGate.saturated()) {
      facts.failure = SATURATED;
      const answer = await notAccepted({});
      refuse(req, res, requestId, answer);
      return answer.status;
    }

    const stagingPath = () => stagingPathOf(request);
    const outcome = await readBody(req, {
      maxBytes: deps.maxBodyBytes, inlineMax: deps.inlineBodyMax, store,
      stagingPath,
      validator: plugin.validator?.(request, node) ?? null,
      held: deps.heldBodies,
      idle: deps.idleBodies,
    });
    if (!outcome.ok) {
      if (outcome.reason === 'too-large') return tooLarge(req, res, requestId, facts.seq);
      if (outcome.reason === 'idle') {
        logger.warn('request body stopped arriving, or arrived too slowly: request given up', { requestId, workflowId: workflow.id });
        return stalled(req, res, requestId, facts.seq);
      }
      if (outcome.reason === 'store-failed') {
        logger.error('claim check could not be stored', { requestId, workflowId: workflow.id, error: outcome.error });
        facts.failure = { cause: CLAIM_CHECK_FAILED, error: outcome.error };
        const answer = await notAccepted({});
        send(res, requestId, answer);
        // The rest of the upload was not read: the connection cannot carry another request.
        if (!req.complete) res.once('finish', () => req.socket.destroy());
        return answer.status;
      }
      if (outcome.reason === 'busy') {
        logger.warn('bodies held in memory are at MAX_HELD_BODY_BYTES, request refused', { requestId, workflowId: workflow.id });
        facts.failure = HELD_FULL;
        const answer = await notAccepted({});
        refuse(req, res, requestId, answer);
        return answer.status;
      }
      if (outcome.reason === 'rejected') { refuse(req, res, requestId, outcome.answer); return outcome.answer.status; }
      return 499; // the client went away; nothing was accepted
    }
    const { body } = outcome;
    facts.bodyBytes = body.size;

    let inspected;
    try {
      const inspecting = plugin.inspect(request, node, body, services);
      inspected = inspecting instanceof Promise ? await inspecting : inspecting;
    } catch (error) {
      // Answered 500 by serve(); the claim check, which nothing will reference, may hold a secret (a WS-Security password).
      if (outcome.stagedPath) void store.delete(outcome.stagedPath).catch(() => undefined);
      throw error;
    }
    if (!inspected.ok) {
      if (outcome.stagedPath) void store.delete(outcome.stagedPath).catch(() => undefined);
      send(res, requestId, inspected.answer);
      return inspected.answer.status;
    }
    if (inspected.inspection.as2) trace.getActiveSpan()?.setAttribute('as2.message_id', inspected.inspection.as2.messageId);

    const refuseAccepted = async (): Promise<number> => {
      const failed = await notAccepted(inspected.inspection);
      send(res, requestId, failed);
      return failed.status;
    };

    // Null when the trigger's validator held the body whole (BodyValidator.holdsWhole): its persistBody is the body.
    let recordBody: Received['body'] | null = body.inline
      ? { kind: 'inline', data: body.inline }
      : outcome.stagedPath ? { kind: 'ref', path: outcome.stagedPath, size: body.size, sha256: body.sha256() } : null;
    const replacement = inspected.inspection.persistBody;
    if (replacement) {
      // The plugin keeps a copy without the secret its raw bytes carry, in place of the raw bytes.
      try {
        if (replacement.length <= deps.inlineBodyMax) {
          recordBody = { kind: 'inline', data: replacement };
          if (outcome.stagedPath) await store.delete(outcome.stagedPath);
        } else {
          const path = stagingPath();
          const stored = await store.put(path, replacement);
          recordBody = { kind: 'ref', path, size: stored.size, sha256: stored.sha256 };
        }
      } catch (error) {
        logger.error('claim check could not be stored', { requestId, workflowId: workflow.id, error });
        facts.failure = { cause: CLAIM_CHECK_FAILED, error };
        // The raw bytes are still there, secret and all, and nothing will reference them.
        if (outcome.stagedPath) void store.delete(outcome.stagedPath).catch(() => undefined);
        return refuseAccepted();
      }
    }

    let received: Received;
    let trail: Record<string, string>;
    let idempotency: ReturnType<NonNullable<typeof plugin.idempotency>> | null;
    let identity: string | null;
    let value: Buffer;
    try {
      if (!recordBody) throw new Error(`the ${plugin.kindOf(node)} trigger held the body whole but gave no persistBody`);
      received = receivedRecord(request, node.name, plugin.kindOf(node), recordBody, admission, inspected.inspection.as2 ?? null);
      trail = traceHeaders();
      received.traceparent = trail.traceparent ?? null;
      idempotency = plugin.idempotency?.(node) ?? null;
      const idempotencyKey = idempotency ? idempotency.keyOf(request, body, inspected.inspection) : null;
      identity = idempotencyKey === null ? null : idempotencyIdentity(workflow.id, idempotencyKey);
      if (identity !== null) {
        received.idempotencyKey = idempotencyKey;
        received.duplicateOf = recentKeys.earlier(identity, request.receivedAt, idempotency!.windowMs);
        trail[IDEMPOTENCY_HEADER] = String(idempotency!.windowMs); // the window travels with the record: replays decide alike
      }
      value = codec.encode('Received', received);
    } catch (error) {
      // A fault of ours, not of the request: it is refused as the trigger refuses what it cannot accept (its
      // notAccepted gives back what inspect claimed, such as a WS-Security token), never answered with a bare 500.
      logger.error('the received record could not be built', { requestId, workflowId: workflow.id, error });
      facts.failure = { cause: 'the received record could not be built', error };
      if (outcome.stagedPath) void store.delete(outcome.stagedPath).catch(() => undefined);
      return refuseAccepted();
    }
    // An answer before this one closes the connection: no 200 could reach the sender, who will send the request
    // again, and accepting it now would have it executed twice. Behind a request whose close is decided late (a
    // chunked body found too large after its workflow was looked up), this one waits for that answer first; it
    // goes out before this one's anyway.
    if (facts.undecided !== undefined && !facts.undecided.writableFinished && !(await answered(facts.undecided))) endsAt(req.socket, facts.seq - 1);
    if ((endingAt.get(req.socket) ?? facts.seq) < facts.seq) {
      if (outcome.stagedPath) void store.delete(outcome.stagedPath).catch(() => undefined);
      logger.info('an earlier answer closes the connection: request not accepted', { requestId, workflowId: workflow.id });
      facts.failure = { cause: 'an earlier answer on the connection closes it: no answer could follow' };
      return refuseAccepted();
    }
    if (!deps.acceptGate.tryEnter(value.length)) {
      if (outcome.stagedPath) void store.delete(outcome.stagedPath).catch(() => undefined);
      logger.warn('log saturated, request refused', { requestId, workflowId: workflow.id, pending: deps.acceptGate.pending().count });
      facts.failure = SATURATED;
      return refuseAccepted();
    }
    try {
      await log.append([{ topic: deps.topics.received, key: recordKey(deps.recordKey, received), value, headers: trail }]);
    } catch (error) {
      // The claim check stays: a failed append may still have reached the log (at-least-once).
      logger.error('durable accept failed', { requestId, workflowId: workflow.id, error });
      facts.failure = { cause: 'durable accept failed: the append to the received log failed', error };
      return refuseAccepted();
    } finally {
      deps.acceptGate.leave(value.length);
    }
    facts.accepted = true;
    if (identity !== null) recentKeys.remember(identity, request.requestId, request.receivedAt, idempotency!.windowMs);
    const pending = plugin.accepted(request, node, body, inspected.inspection, services);
    const answer = pending instanceof Promise ? await pending : pending;
    // Only an answer with the missing workflow's bytes (a hook with No Response Body) needs its time
    // imitated; slower kinds would otherwise stretch every imitated wait. An AS2 message that asks for an
    // asynchronous MDN is answered empty too, after its decryption and signatures: not a webhook's, not timed.
    if (looksEmpty(answer) && facts.triggerKind === 'webhook') deps.acceptTiming.record(performance.now() - outcome.lastByteAt, outcome.stagedPath !== null);
    send(res, requestId, answer);
    return answer.status;
  }

  /** A refusal of an existing workflow, for the request journal: queued, never awaited (refusal-journal.ts). */
  function noteRefusal(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, status: number, facts: RequestFacts, span: Span) {
    const messageId = facts.triggerKind === 'as2' ? req.headers['message-id'] : undefined;
    deps.refusals!.note({
      requestId, workflowId: facts.workflowId!, triggerNode: facts.triggerNode, triggerKind: facts.triggerKind, status,
      code: status === 499 ? 'client-closed' : codes.get(res) ?? null,
      receivedAt: facts.receivedAt || Date.now(), remoteAddress: req.socket.remoteAddress ?? null,
      messageId: typeof messageId === 'string' && messageId.length <= 998 ? messageId.trim() : null,
      bodyBytes: facts.bodyBytes,
      traceparent: isSpanContextValid(span.spanContext()) ? traceHeaders(trace.setSpan(context.active(), span)).traceparent ?? null : null,
    });
  }

  /** What decides a request's answer and returns its status: handle(), or a refusal made before it (a 417). */
  type Decide = (req: http.IncomingMessage, res: http.ServerResponse, requestId: string, facts: RequestFacts, route: HookRoute | null) => Promise<number> | number;
  /** One request, start to metrics; `decide` gives the answer. */
  async function serve(req: http.IncomingMessage, res: http.ServerResponse, span: Span, { requestId, seq, undecided }: InHand, route: HookRoute | null, shape: HttpShape, decide: Decide): Promise<void> {
    const started = performance.now();
    const facts: RequestFacts = { triggerKind: null, bodyBytes: 0, seq, undecided, workflowId: null, triggerNode: null, receivedAt: 0, accepted: false, failure: null };
    // Without an SDK the span records nothing: its attributes are not even built.
    if (span.isRecording()) {
      span.setAttributes({ 'http.request.method': shape.method, 'url.scheme': 'http', 'url.path': targetPath(req.url ?? ''), 'ingress.request_id': requestId });
      if (shape.routed) span.setAttribute('http.route', HOOK_ROUTE);
      if (shape.method === OTHER_METHOD) span.setAttribute('http.request.method_original', req.method ?? '');
    }
    let status: number;
    try {
      const deciding = decide(req, res, requestId, facts, route);
      status = typeof deciding === 'number' ? deciding : await deciding;
    } catch (error) {
      logger.error('request failed', { requestId, error });
      send(res, requestId, errorAnswer('internal-error'));
      // On the span as a 503's cause is (exceptionOf): its kind, never its message.
      facts.failure = { cause: INTERNAL_ERROR, error };
      status = 500;
    }
    const raw = parserRefused.answerOf(res);
    if (raw !== undefined) {
      status = raw.status;
      codes.set(res, answerCode(raw));
      outcomes.delete(res);
    }
    deps.metrics.request(status, facts.triggerKind, (performance.now() - started) / 1000, facts.bodyBytes, outcomes.get(res), shape);
    // Not accepted and not a refusal either: a 2xx with no AS2 outcome is a request answered without anything to
    // accept (a logistics Ping), which the request journal must not list as refused.
    const refused = status >= 400 || outcomes.has(res);
    if (!facts.accepted && refused && facts.workflowId !== null && deps.refusals) noteRefusal(req, res, requestId, status, facts, span);
    span.setAttribute('http.response.status_code', status);
    // The error behind a failure of ours, as an exception event: its kind, never its message (exceptionOf).
    if (facts.failure?.error !== undefined) span.recordException(exceptionOf(facts.failure));
    if (status >= 500) {
      span.setAttribute('error.type', String(status));
      span.setStatus({ code: SpanStatusCode.ERROR, message: facts.failure?.cause });
    }
    span.end();
  }

  /** Starts a request's span, named by its method and whether the route matched, and serves the request in it. */
  function begin(req: http.IncomingMessage, res: http.ServerResponse, entry: InHand, decide: Decide) {
    const route = parseHookRoute(req.url ?? '/');
    const shape = httpShape(req.method, route !== null);
    const span = tracer().startSpan(shape.spanName, { kind: SpanKind.SERVER });
    // A span without a valid context (no SDK) has nothing to propagate: the request runs without one.
    if (isSpanContextValid(span.spanContext())) void context.with(trace.setSpan(context.active(), span), serve, undefined, req, res, span, entry, route, shape, decide);
    else void serve(req, res, span, entry, route, shape, decide);
  }

  /**
   * The span and the count of a request answered raw, with no ServerResponse: a CONNECT (its shape known), or what
   * the HTTP parser refused before a request existed (no shape: its method is not known, and it has no duration).
   */
  function recordRaw(requestId: string, status: number, startedAt: number, shape: HttpShape | null, attributes: Attributes) {
    const span = tracer().startSpan(shape?.spanName ?? 'HTTP', { kind: SpanKind.SERVER, startTime: performance.timeOrigin + startedAt });
    if (span.isRecording()) {
      span.setAttributes({ 'http.request.method': shape?.method ?? OTHER_METHOD, 'url.scheme': 'http', 'ingress.request_id': requestId, 'http.response.status_code': status, ...attributes });
      if (shape?.routed) span.setAttribute('http.route', HOOK_ROUTE);
    }
    span.end();
    if (shape) deps.metrics.request(status, null, (performance.now() - startedAt) / 1000, 0, undefined, shape);
    else deps.metrics.refusedByParser(status);
  }

  /**
   * Each connection's latest request, so that a parse error after it (clientError) can let it answer, with the
   * answer owed just before it (`earlier`). Node writes a connection's answers in order and each finishes only
   * after the one before it, so that answer's 'finish' is every earlier one's. Only the answer is kept, not the
   * request it was for: a link to that would chain every request of a connection that never stops pipelining,
   * each kept for as long as the connection lives.
   */
  const inHand = new WeakMap<Socket, InHand>();
  /**
   * Puts the request in hand on its connection, with its place there (RequestFacts.seq). What is known from its
   * head to close the connection after its answer is noted at once: it asked for the close (or HTTP/1.0), its
   * body is declared over the limit (a 413, or a refusal that does not read it through), or it has no Host.
   */
  function track(req: http.IncomingMessage, res: http.ServerResponse): InHand {
    const prior = inHand.get(req.socket);
    const seq = prior === undefined ? 0 : prior.seq + 1;
    const owed = prior !== undefined && !prior.res.writableFinished ? prior : undefined;
    const entry: InHand = {
      req, res, requestId: randomUUID(), earlier: owed?.res, seq,
      // A chunked body's size is known only as it is read: one over the limit closes the connection after its
      // answer, decided after its workflow was looked up. Those behind it, until it is answered, wait for that.
      late: req.headers['transfer-encoding'] !== undefined || owed?.late === true,
      undecided: owed?.late === true ? owed.res : undefined,
    };
    inHand.set(req.socket, entry);
    if (!res.shouldKeepAlive || declaredTooLarge(req) || lacksHost(req)) endsAt(req.socket, seq);
    return entry;
  }
  const server = http.createServer({ requireHostHeader: false }, (req, res) => {
    // Node's parser stops at the end of a request that asks for an upgrade (`Connection: upgrade` with `Upgrade`)
    // and drops the rest of what it read with it; without an 'upgrade' listener the request is served as any
    // other, but the requests pipelined behind it are lost, unanswered, on a connection left open. Its answer
    // closes the connection instead: the client knows from it that nothing after it was read.
    if (req.headers.upgrade !== undefined) res.shouldKeepAlive = false;
    begin(req, res, track(req, res), handle);
  });
  /** Requests the HTTP parser refuses (parser-refusals.ts): each answered after the answers owed before it. */
  const parserRefused = parserRefusals({
    logger,
    inHand: (socket) => inHand.get(socket),
    declaredTooLarge,
    tooLarge: (entry) => { tooLarge(entry.req, entry.res, entry.requestId, entry.seq); return TOO_LARGE; },
    recordRefused: (requestId, status, startedAt, attributes) => recordRaw(requestId, status, startedAt, null, attributes),
  });
  server.on('clientError', (error: NodeJS.ErrnoException, duplex) => parserRefused.clientError(error, duplex as Socket));
  // Requests Node would otherwise answer bare (an unknown Expect: 417 without a request id) or not at all
  // (CONNECT: the socket is handed over and left open): each gets the JSON error and a request id.
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    res.shouldKeepAlive = false; // its body, if any, is not read
    // In hand like any request: a parse error after it must not be answered after its `Connection: close`.
    const entry = track(req, res);
    if (logger.enabled('info')) logger.info('request refused: an expectation other than 100-continue', { requestId: entry.requestId, remoteAddress: req.socket.remoteAddress ?? null });
    // Served as any request (a span, its metrics), decided at once.
    begin(req, res, entry, (_req, _res, requestId) => { send(res, requestId, EXPECTATION_FAILED); return EXPECTATION_FAILED.status; });
  });
  server.on('connect', (req: http.IncomingMessage, socket: Socket) => {
    const startedAt = performance.now();
    const requestId = randomUUID();
    if (logger.enabled('info')) logger.info('request refused: CONNECT', { requestId, remoteAddress: req.socket.remoteAddress ?? null });
    socket.on('error', () => undefined);
    // The server allows half-open connections, so end() alone would leave the socket open for as long as the
    // client keeps its side: closed once the answer is written (no HTTP timeout covers a handed-over socket).
    const answer = () => {
      socket.end(rawAnswer(CONNECT_REFUSED, requestId), () => socket.destroy());
      recordRaw(requestId, CONNECT_REFUSED.status, startedAt, httpShape(req.method, parseHookRoute(req.url ?? '') !== null), {});
    };
    // Requests pipelined before it may still be answering on this socket (Node hands it over all the same):
    // written at once, the refusal would go out before their answers, and the close would cut them off.
    const before = inHand.get(socket);
    if (before !== undefined) afterAnswer(before.res, answer);
    else answer();
  });
  // A client that shuts its side once the request is sent (FIN after the body) still reads the answer: Node's
  // default aborts the request on that FIN and closes without one. With this, the request is handled, answered,
  // and the connection then ends. (Node's own property, set as its tests do; it is not in @types/node.)
  (server as http.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  keepIdleConnections(server);
  server.requestTimeout = 300_000;

  return {
    server,
    listen(port, host) {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => { server.off('error', reject); resolve((server.address() as AddressInfo).port); });
      });
    },
    close(graceMs = 10_000) {
      // server.close() stops accepting and closes the connections idle at that moment, but a busy keep-alive
      // connection would stay open after its answer and could carry more requests until the grace ends. From now
      // on each connection's latest request is answered `Connection: close` (those pipelined before it keep their
      // answers), requests that arrive after it are refused 503, and the server closes once the last request in
      // flight is answered.
      closeBegun = true;
      return new Promise((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        // An answer that went out keep-alive just before close began leaves its connection idle once it is
        // written, after server.close() closed the idle ones: those are closed as they turn idle.
        const sweep = setInterval(() => server.closeIdleConnections(), 100);
        server.close(() => { clearTimeout(timer); clearInterval(sweep); resolve(); });
      });
    },
  };
}

/** An HTTP/1.1 request without Host (RFC 9112 §3.2: a 400). */
const lacksHost = (req: http.IncomingMessage) => req.headers.host === undefined && req.httpVersionMinor === 1 && req.httpVersionMajor === 1;
/** A hook path with a `.` or `..` segment (route.ts): no workflow is called `.`, and `..` climbs out of nothing. */
const DOT_SEGMENT = errorAnswer('request-malformed', 'The request path has a "." or ".." segment (percent-encoded or not); no hook URL has one');
const NO_HOST = errorAnswer('request-malformed', 'An HTTP/1.1 request must carry a Host header', { connection: 'close' });
const EXPECTATION_FAILED = errorAnswer('expectation-failed');
const CONNECT_REFUSED = errorAnswer('method-not-allowed', undefined, { allow: 'POST' });

/** Causes of a 503 (or 500) of ours, for the span (RequestFacts.failure). */
const SATURATED = { cause: 'the log is saturated: back-pressure refuses the accept' };
const HELD_FULL = { cause: 'bodies held in memory are at MAX_HELD_BODY_BYTES' };
const STOPPING = { cause: 'the receiver is stopping' };
const CLAIM_CHECK_FAILED = 'the claim check could not be stored';
/** The cause of a 500: a fault in the request handler (a trigger's inspect threw). */
const INTERNAL_ERROR = 'the request handler failed';

/**
 * The exception event of a failure: our words for its cause, and of the error only its class name and code, both
 * when they are plain identifiers (an error's message may quote what it failed on: a connection string, a body).
 */
function exceptionOf(failure: { cause: string; error?: unknown }): { name: string; message: string; code?: string } {
  const error = failure.error as { name?: unknown; code?: unknown } | undefined;
  const name = typeof error?.name === 'string' && IDENTIFIER.test(error.name) ? error.name : 'Error';
  const code = typeof error?.code === 'string' && IDENTIFIER.test(error.code) ? error.code : undefined;
  return code === undefined ? { name, message: failure.cause } : { name, message: failure.cause, code };
}
const IDENTIFIER = /^[A-Za-z_$][\w$.-]{0,63}$/;
