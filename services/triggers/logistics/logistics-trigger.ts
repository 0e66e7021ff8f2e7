import { isUtf8 } from 'node:buffer';
import type { DecodedItem } from '../../platform/avro/records';
import type { WorkflowNode } from '../../platform/registry/documents';
import { INGRESS_ERRORS, IngressError, RETRY_AFTER_SECONDS, type Answer, type IngressErrorCode } from '../answers';
import { checkHeaderAuth, hasContentEncoding, nodeCredential } from '../header-auth';
import type { InboundRequest, TriggerPlugin, TriggerServices } from '../trigger';
import { sanitizeFilename, stagingFolder, uniqueNamer } from '../staged-files';
import { wholeBody } from '../whole-body';
import { DEFAULT_HELD_BODY_BYTES, heldBytes, type HeldBytes } from '../held-bytes';
import { logisticsParameters, logisticsProblems, type LogisticsParameters } from './parameters';
import { readEnvelope, readSendStream, requestBudget, sendStreamOf, SendStreamError, SOAP_ACTIONS, usernameTokenOf, type SendStreamLimits, type StreamMessage } from './send-stream';
import { pingAnswer, sendStreamAccepted, soapFault, type LogisticsFaultCode } from './soap-answers';
import { unwrapUniversal, type Unwrapped } from './universal';
import { checkUsernameToken, tokenReplayKey } from './username-token';
import { withoutPasswords } from './password-redaction';
import { createNonceLedger } from './nonce-ledger';
import { sharedNonces, type SharedNonces } from './shared-nonces';
import { spendOnLonger, XmlError, type XmlValue } from './xml';
import { MAX_RECORD_BYTES } from '../../platform/log/event-log';

/**
 * The logistics-platform trigger (SPEC §2.3, DESIGN.md §6): the eAdaptor's SOAP SendStreamRequest.
 *
 * Receiver: header authentication if the node asks for it; the whole envelope is read (bounded), every
 * Message decoded and its document parsed, so a bad one gets a SOAP Fault naming its TrackingID and
 * nothing of that request runs; Ping is answered without accepting anything.
 * Decoder: one item per Message whose document is a selected event type, `{ event, data }` (or
 * `{ event, file }` with Raw Body), with the Message's TrackingID and attributes; other documents and
 * unselected types are logged and start nothing. Each item's sourceIndex is its Message's position, so
 * its execution id does not depend on which Messages `actions` skipped (a replay after `actions` changed).
 */
export interface LogisticsLimits extends SendStreamLimits {
  /** Largest SOAP request held in memory to be checked (and decoded). */
  maxEnvelopeBytes: number;
  /** How far a digest UsernameToken's Created may be from now. */
  maxTokenSkewMs: number;
}

/**
 * Parsing is synchronous and the parsed tree costs far more than the bytes, so one request is bounded
 * well below the service-wide limits: 16 MiB held, 8 MiB inflated (what one decoded record holds) and
 * 500 000 parse units in all (xml.ts: an element, attribute or reference each, and 32 characters of text;
 * a 100 KiB shipment is about 7 000; at most 256 attributes on one element), which keeps the worst request
 * within about twice the parsing of one 8 MiB text node, however its bytes are spent (docs/logistics.md has
 * the measurements, test/bench/logistics-worst.js makes them).
 */
export const DEFAULT_LOGISTICS_LIMITS: LogisticsLimits = {
  maxEnvelopeBytes: 16 * 1024 * 1024,
  maxInflatedBytes: 8 * 1024 * 1024,
  maxParseUnits: 500_000,
  maxMessages: 1000,
  maxTokenSkewMs: 5 * 60 * 1000,
};

/** One Message's output: the event, its document (or file), and where it came from. */
function itemValue(unwrapped: { event: string }, message: StreamMessage, batchSize: number, content: { data: XmlValue } | { file: string }): string {
  const batch = batchSize > 1 ? { batchIndex: message.index, batchSize } : {};
  return JSON.stringify({ event: unwrapped.event, ...content, trackingId: message.trackingId, message: message.attributes, ...batch });
}

/** The decoded record's other fields and Avro framing, beside its items. */
const RECORD_OVERHEAD_BYTES = 64 * 1024;
/** A stand-in for a staged file's path, as long as one can be (staged-files.ts: folder and a 200-byte name). */
const LONGEST_PATH = 'p'.repeat(512);

const RECORD_ROOM = MAX_RECORD_BYTES - RECORD_OVERHEAD_BYTES;

/** C0 controls JSON writes as six bytes (\u0001); XML forbids them, but the parser lets them through. */
const SIX_BYTE_ESCAPES = /[\u0000-\u0007\u000b\u000e-\u001f]/g;

/**
 * At most how many bytes a document's JSON takes in the record, which Kafka counts in UTF-8 bytes: at most
 * twice the document's UTF-8 bytes (quotes and backslashes are escaped, attributes gain an `@`, `<a/>`
 * becomes `"a":""`), plus four for each control character written as `\u00XX`. Counting UTF-16 units
 * instead let CJK text (three bytes a character) pass as fitting and be dead-lettered after its 200.
 */
function jsonBytesAtMost(xml: string): number {
  let controls = 0;
  SIX_BYTE_ESCAPES.lastIndex = 0;
  while (SIX_BYTE_ESCAPES.exec(xml)) controls++;
  return 2 * Buffer.byteLength(xml, 'utf8') + 4 * controls;
}

/**
 * Whether the items the decoder will make of these Messages surely fit one record (jsonBytesAtMost); only a
 * request whose documents may be larger than that is measured exactly (fitsOneRecord), holding its parsed
 * documents. An item writes its TrackingID twice (`trackingId`, and among the attributes) and, with Raw Body, a
 * file's path in its value and in its files: counted once, a 4.2 MB TrackingID was accepted and its record
 * dead-lettered as too large after the 200.
 */
function surelyFitsOneRecord(messages: StreamMessage[], params: LogisticsParameters): boolean {
  const paths = params.rawBody ? 2 * LONGEST_PATH.length : 0;
  return messages.reduce((n, message) => n + jsonBytesAtMost(message.xml) + Buffer.byteLength(JSON.stringify(message.attributes))
    + Buffer.byteLength(JSON.stringify(message.trackingId)) + paths + 256, 0) <= RECORD_ROOM;
}

/** Whether the items the decoder will make of these Messages fit one record, by building what it builds. */
function fitsOneRecord(messages: { message: StreamMessage; unwrapped: Unwrapped }[], params: LogisticsParameters): boolean {
  let total = 0;
  for (const { message, unwrapped } of messages) {
    if (unwrapped.kind !== 'event' || !params.actions.has(unwrapped.event)) continue;
    // With Raw Body the item's files list the path again.
    total += Buffer.byteLength(itemValue(unwrapped, message, messages.length, params.rawBody ? { file: LONGEST_PATH } : { data: unwrapped.data })) + (params.rawBody ? LONGEST_PATH.length : 0);
    if (total > RECORD_ROOM) return false;
  }
  return true;
}

/** Nothing was accepted, for now: the platform sends it again. */
function busyFault(): Answer {
  const fault = faultFor('enqueue-failed');
  return { ...fault, headers: { ...fault.headers, 'retry-after': RETRY_AFTER_SECONDS } };
}

/** The Fault for an ingress error: its status and message; `journalCode` when the journal should know more than the partner is told. */
function faultFor(code: IngressErrorCode, message?: string, journalCode: LogisticsFaultCode = code): Answer {
  const entry = INGRESS_ERRORS[code];
  return soapFault({ status: entry.status, faultCode: entry.status >= 500 ? 'Server' : 'Client', code: journalCode, message: message ?? entry.message });
}

function faultForInput(error: unknown): Answer {
  if (error instanceof SendStreamError) return soapFault({
    status: 500, faultCode: error.faultCode, code: error.faultCode === 'VersionMismatch' ? 'soap-version-mismatch' : 'payload-parse-error',
    message: `The request could not be read: ${error.message}`, trackingId: error.trackingId,
  });
  throw error;
}

function soapAction(request: InboundRequest): 'sendStream' | 'ping' | 'unknown' {
  const raw = request.headers.soapaction;
  if (raw === undefined) return 'sendStream'; // the envelope decides; some clients omit the header
  const action = raw.trim().replace(/^"(.*)"$/, '$1');
  if (action === SOAP_ACTIONS.sendStream || action === '') return 'sendStream';
  if (action === SOAP_ACTIONS.ping) return 'ping';
  return 'unknown';
}

export interface LogisticsOptions {
  /**
   * Claim digest tokens in the object store too (shared-nonces.ts), so that receiver replicas refuse each
   * other's replays: where several receivers may run (on Kafka).
   */
  sharedNonces: boolean;
}

export function createLogisticsTrigger(limits: LogisticsLimits = DEFAULT_LOGISTICS_LIMITS, held: HeldBytes = heldBytes(DEFAULT_HELD_BODY_BYTES), options: LogisticsOptions = { sharedNonces: false }): TriggerPlugin {
  // Held whole, and persisted from here only: a raw envelope never reaches the object store, so its passwords
  // cannot outlive their redaction there (a store that keeps versions or deleted blobs).
  const whole = wholeBody(limits.maxEnvelopeBytes, () => soapFault({ status: 413, faultCode: 'Client', code: 'payload-too-large', message: `The request is larger than ${limits.maxEnvelopeBytes} bytes` }), held, { holdsWhole: true });

  const nonces = createNonceLedger();
  /** The digest token a request used, claimed in the ledger (and the shared one) until the request is accepted or refused. */
  const claims = new WeakMap<InboundRequest, { key: string; expiresAt: number; shared: SharedNonces | null; services: TriggerServices }>();

  async function tokenVerdict(request: InboundRequest, node: WorkflowNode, token: Parameters<typeof checkUsernameToken>[0], services: TriggerServices): Promise<Answer | null> {
    if (logisticsParameters(node).authentication !== 'wsUsernameToken') return null;
    const credential = await nodeCredential(node, 'basicAuth', request.workflowId, services, 'wsUsernameToken');
    if (!credential || credential.type !== 'basicAuth') return faultFor('credential-unavailable');
    const now = Date.now();
    const verdict = checkUsernameToken(token, credential.data, now, limits.maxTokenSkewMs);
    if (!verdict.ok) return faultFor(verdict.code);
    if (token?.passwordType === 'digest') {
      // Only a token that verified is remembered: nobody without the password can fill the ledger.
      const key = tokenReplayKey(node.credentials?.wsUsernameToken ?? '', token);
      const expiresAt = Date.parse(token.created ?? '') + limits.maxTokenSkewMs;
      const replayed = () => {
        services.logger.warn('a WS-Security UsernameToken was used again; refused as a replay', { workflowId: request.workflowId, requestId: request.requestId });
        // The partner is told only that its authorization is wrong; the journal says why.
        return faultFor('authorization-wrong', undefined, 'token-replayed');
      };
      if (!nonces.claim(key, expiresAt, now)) return replayed();
      const shared = options.sharedNonces ? sharedNonces(services.store) : null;
      let claimed = true;
      try { if (shared) claimed = await shared.claim(request.requestId, key, expiresAt); } catch (error) {
        // Unknown whether another replica saw it: refused for now (nothing accepted; the platform sends it again).
        nonces.release(key);
        services.logger.warn('the shared ledger of WS-Security tokens could not be written; the request is refused for now', { workflowId: request.workflowId, requestId: request.requestId, error: (error as Error).message });
        return busyFault();
      }
      if (!claimed) {
        // Another replica holds it. Not held here: if that replica releases it (its request not accepted), a resend here passes.
        nonces.release(key);
        return replayed();
      }
      claims.set(request, { key, expiresAt, shared, services });
    }
    return null;
  }

  /** The request was not accepted: its token may come again (the partner resends the same bytes). */
  async function releaseToken(request: InboundRequest): Promise<void> {
    const claim = claims.get(request);
    claims.delete(request);
    if (claim === undefined) return;
    nonces.release(claim.key);
    await claim.shared?.release(claim.key, claim.expiresAt).catch((error: Error) => {
      // The claim stays until its token expires: a resend of the same bytes within that time is taken for a replay.
      claim.services.logger.warn('a WS-Security token claim could not be released from the shared ledger', { workflowId: request.workflowId, requestId: request.requestId, error: error.message });
    });
  }

  return {
    nodeTypes: ['logisticsTrigger'],
    kindOf: () => 'logistics',

    async admit(request, node, services) {
      if (soapAction(request) === 'unknown') return { ok: false, answer: soapFault({ status: 500, faultCode: 'Client', code: 'soap-action-unknown', message: 'The SOAPAction is not one this endpoint serves (SendStream, Ping)' }) };
      if (hasContentEncoding(request)) return { ok: false, answer: faultFor('unsupported-media', 'Content-Encoding is not supported; the Messages are compressed already') };
      const auth = logisticsParameters(node).authentication;
      // A UsernameToken is in the envelope: inspect checks it.
      const outcome = await checkHeaderAuth(request, node, auth === 'wsUsernameToken' ? 'none' : auth, services);
      return outcome.ok ? outcome : { ok: false, answer: faultFor(outcome.code) };
    },

    validator: (request) => whole.validator(request),

    async inspect(request, node, body, services) {
      const bytes = whole.take(request, body);
      if (bytes === 'busy') return { ok: false, answer: busyFault() };
      if (!bytes) return { ok: false, answer: faultFor('internal-error') };
      const text = bytes.toString('utf8');
      const budget = requestBudget(limits);
      try {
        // Decoding bytes that are not UTF-8 would hand the workflow U+FFFD for them, and make the kept copy
        // (re-encoded after redaction) up to three times the request, past what the decoder reads.
        if (!isUtf8(bytes)) throw new SendStreamError('the envelope is not valid UTF-8 text');
        const envelope = readEnvelope(text, true, budget);
        // The caller is checked before any Message is inflated or parsed.
        const token = usernameTokenOf(envelope);
        const refused = await tokenVerdict(request, node, token, services);
        if (refused) return { ok: false, answer: refused };
        if (soapAction(request) === 'ping') return { ok: false, answer: pingAnswer() }; // nothing to accept: answered here
        const messages = sendStreamOf(envelope, limits, budget).messages;
        const measure = !surelyFitsOneRecord(messages, logisticsParameters(node));
        const opened: { message: StreamMessage; unwrapped: Unwrapped }[] = [];
        for (const message of messages) {
          try {
            const unwrapped = unwrapUniversal(message.xml, true, budget);
            if (measure) opened.push({ message, unwrapped });
          } catch (error) {
            if (error instanceof XmlError) throw new SendStreamError(`Message ${message.index + 1} is ${error.message}`, message.trackingId);
            throw error;
          }
        }
        if (measure && !fitsOneRecord(opened, logisticsParameters(node))) {
          await releaseToken(request);
          return { ok: false, answer: soapFault({ status: 413, faultCode: 'Client', code: 'payload-too-large', message: `The request's Messages decode to more than one record holds (${MAX_RECORD_BYTES} bytes): send fewer per request, or set Raw Body` }) };
        }
        // WS-Security passwords never reach a topic, whether or not the token was one this node checks.
        const kept = withoutPasswords(text);
        try { spendOnLonger(budget, text.length, kept.length); } catch (error) { throw new SendStreamError(`the envelope with its passwords redacted is ${(error as Error).message}`); }
        const keptBytes = kept === text ? bytes.length : Buffer.byteLength(kept, 'utf8');
        if (keptBytes > limits.maxEnvelopeBytes) {
          // The decoder reads no more than this: accepted, the request would be dead-lettered after its 200.
          await releaseToken(request);
          return { ok: false, answer: soapFault({ status: 413, faultCode: 'Client', code: 'payload-too-large', message: `The request with its passwords redacted (each replaced by [redacted]) is larger than ${limits.maxEnvelopeBytes} bytes` }) };
        }
        // Always given (the receiver holds no copy of its own): the bytes as they came when nothing was redacted.
        return { ok: true, inspection: { persistBody: kept !== text ? Buffer.from(kept, 'utf8') : bytes } };
      } catch (error) {
        await releaseToken(request);
        return { ok: false, answer: faultForInput(error) };
      }
    },

    accepted: () => sendStreamAccepted(),

    // The platform retries a SendStream that failed; a Fault (not the receiver's JSON) is what it reads.
    async notAccepted(request) {
      await releaseToken(request);
      return busyFault();
    },

    async decode(received, node, services) {
      const params = logisticsParameters(node);
      const log = services.logger;
      const bytes = await services.readBody(received, limits.maxEnvelopeBytes);
      const budget = requestBudget(limits);
      let stream;
      try {
        stream = readSendStream(bytes.toString('utf8'), limits, false, budget);
      } catch (error) {
        if (error instanceof SendStreamError) throw new IngressError('payload-parse-error', error.message);
        throw error;
      }
      const folder = stagingFolder(received.workflowId, received.receivedAt, received.requestId);
      const uniqueName = uniqueNamer();
      const batchSize = stream.messages.length;
      const items: DecodedItem[] = [];
      for (const message of stream.messages) {
        const context = { workflowId: received.workflowId, requestId: received.requestId, trackingId: message.trackingId, message: message.index + 1 };
        let unwrapped;
        try { unwrapped = unwrapUniversal(message.xml, false, budget); } catch (error) { throw new IngressError('payload-parse-error', `Message ${message.index + 1}: ${(error as Error).message}`); }
        if (unwrapped.kind === 'other') { log.info('logistics message skipped: not an event or shipment document', { ...context, documentType: unwrapped.documentType }); continue; }
        if (!params.actions.has(unwrapped.event)) { log.info('logistics message skipped: event type not selected', { ...context, event: unwrapped.event }); continue; }
        if (params.rawBody) {
          const path = `${folder}/${uniqueName(message.attributes.FileName ? sanitizeFilename(message.attributes.FileName) : `message-${message.index + 1}.xml`)}`;
          await services.store.put(path, Buffer.from(message.xml, 'utf8'), { contentType: 'application/xml' });
          items.push({ value: itemValue(unwrapped, message, batchSize, { file: path }), files: [path], sourceIndex: message.index });
        } else {
          items.push({ value: itemValue(unwrapped, message, batchSize, { data: unwrapped.data }), files: [], sourceIndex: message.index });
        }
      }
      return items;
    },

    validateNode: logisticsProblems,
  };
}
