import type { As2Envelope } from '../../platform/avro/records';
import { MAX_RECORD_BYTES } from '../../platform/log/event-log';
import type { WorkflowNode } from '../../platform/registry/documents';
import { BUSY, errorAnswer, type Answer } from '../answers';
import type { InboundRequest, InspectOutcome, Inspection, TriggerPlugin, TriggerServices } from '../trigger';
// An AS2 node is a webhook node in Protocol AS2: its parameters and header checks are the webhook node's.
import { authenticate } from '../webhook/authenticate';
import { firstSighting } from '../first-sighting';
import { nodeCredential } from '../header-auth';
import { isBotUserAgent } from '../bot-detector';
import { parameterProblems, webhookParameters } from '../webhook/parameters';
import { idempotencyUnsupported } from '../webhook/idempotency';
import { identityOf, type As2Identity } from './certificates';
import { decodeAs2, decodedBytesBound } from './decode';
import { envelopeFault } from './envelope';
import { asyncMdnTarget, type AsyncMdnTarget } from './async-mdn';
import { loggableUrl } from '../../platform/net/url-allow-list';
import { CALLBACK_URL_HEADERS, evidenceFolder, keepEvidence, mdnEntity, messageEntity } from './evidence';
import { As2Fault, asFault } from './faults';
import { buildMdn, chooseMicalg, computeMic, isMdn, micAlgorithm, parseMdnOptions, type Mdn, type MdnInput } from './mdn';
import { parseMediaType } from './mime';
import { as2ParameterProblems, as2Parameters } from './parameters';
import { hasMultipleAttachments, unwrapMessage } from './unwrap';
import { wholeBody } from '../whole-body';
import { DEFAULT_HELD_BODY_BYTES, heldBytes, type HeldBytes, type HeldShare } from '../held-bytes';

/**
 * The webhook trigger in Protocol AS2 (SPEC §2.1, §4.2, §4.3, RFC 4130): a receiver of signed, encrypted
 * and compressed EDI messages that answers a synchronous MDN.
 *
 * Receiver: admit (AS2 Receiver Auth, envelope headers, pins, an asynchronous MDN's URL) → inspect (the fast path the MDN needs:
 * decrypt, verify, MIC, and the processed MDN itself, which travels in the received record) → durable
 * accept → that MDN (accepted; or an empty 200 when it goes asynchronously, docs/as2-async-mdn.md) or a
 * failure MDN (notAccepted; the recorded one is then never sent). Failure MDNs are always the HTTP answer,
 * even when an asynchronous one was asked for: nothing refused waits on a delivery.
 * Every fault is an As2Fault (faults.ts) answered with its disposition. Raw message and MDN are kept
 * (evidence.ts): an accepted message's by the decoder, from the record; a refused one's before the answer.
 * Decoder: decode.ts keeps the evidence, opens the raw message again and stages the payloads.
 */
export interface As2Limits {
  maxInflatedBytes: number;
  /** Largest message the decoder reads into memory (the receiver holds it too, up to MAX_BODY_BYTES). */
  maxMessageBytes: number;
  allowMd5: boolean;
}

export const DEFAULT_AS2_LIMITS: As2Limits = { maxInflatedBytes: 256 * 1024 * 1024, maxMessageBytes: 256 * 1024 * 1024, allowMd5: false };

const REPORTING_UA = 'inbound-event-ingress AS2 receiver';

/** Whether a failure MDN is kept as evidence: no; yes (a store failure is only logged); or else not answered at all. */
type Keep = boolean | 'or-withhold';

interface Accepted { identity: As2Identity; message: Buffer; /** The processed MDN, also in the received record. */ mdn: Mdn; /** Where the mdn stage delivers it; null: it is the HTTP answer. */ asyncMdn: AsyncMdnTarget | null }

/** A credential whose certificates or keys do not open, by id: put again, and readable, it is forgotten. */
const unopenableFirstSeen = firstSighting();
/** A credential whose certificates are read past a fault (As2Identity.warnings), by id and what: warned once, again when that changes. */
const warnedFirstSeen = firstSighting();

export function createAs2Trigger(limits: As2Limits = DEFAULT_AS2_LIMITS, held: HeldBytes = heldBytes(DEFAULT_HELD_BODY_BYTES)): TriggerPlugin {
  /** The message is opened whole; one past INLINE_BODY_MAX is kept while it streams (the receiver caps its size). */
  const whole = wholeBody(limits.maxMessageBytes, () => errorAnswer('payload-too-large'), held);

  /**
   * The receiver's identity, from the node's credential; null (logged, as nodeCredential logs: at error once per
   * process until it works again, a flood of messages would log a line each) when it cannot be used.
   */
  async function identityFor(request: InboundRequest, node: WorkflowNode, services: TriggerServices): Promise<As2Identity | null> {
    const credential = await nodeCredential(node, 'as2ReceiverAuth', request.workflowId, services);
    if (credential?.type !== 'as2ReceiverAuth') return null;
    const credentialId = as2Parameters(node).credentialId ?? '';
    try {
      const identity = identityOf(credential.data);
      unopenableFirstSeen.forget(credentialId);
      if (identity.warnings.length > 0 && warnedFirstSeen.changed(identity.warnings.join('\n'), credentialId)) {
        services.logger.warn('AS2 credential certificate is malformed; read as OpenSSL reads it', { workflowId: request.workflowId, credentialId, warnings: identity.warnings });
      }
      return identity;
    } catch (error) {
      const first = unopenableFirstSeen(credentialId);
      services.logger[first ? 'error' : 'debug']('AS2 credential cannot be read', { workflowId: request.workflowId, credentialId, error, ...(first ? {} : { repeated: true }) });
      return null;
    }
  }

  const log = (services: TriggerServices, request: InboundRequest, event: string, fields: Record<string, unknown> = {}, level: 'info' | 'warn' = 'info') =>
    services.logger[level](event, { event, workflowId: request.workflowId, messageId: request.headers['message-id'] ?? null, requestId: request.requestId, ...fields });

  const makeMdn = (request: InboundRequest, input: Omit<MdnInput, 'headers' | 'reportingUa'>): Promise<Mdn> => buildMdn({ ...input, headers: request.headers, reportingUa: REPORTING_UA });

  function sent(request: InboundRequest, services: TriggerServices, status: number, mdn: Mdn, disposition: string): Answer {
    log(services, request, 'as2.mdn-sent', { disposition, signed: mdn.headers['content-type'].startsWith('multipart/signed'), mdnMessageId: mdn.messageId });
    return { status, headers: mdn.headers, body: mdn.body, outcome: disposition };
  }

  /**
   * A failure MDN as the HTTP answer. With `keep` (the sender is authenticated, see evidence.ts) it is
   * kept as evidence first, under this request's own folder. A store failure is logged, never the partner's
   * problem, except with `keep: 'or-withhold'`: the mdn stage reads that evidence to know that a processed
   * MDN recorded in the log must not go out, so without it no MDN is answered at all (503, send it again),
   * and the partner cannot get a failure MDN and then a processed one for the same message.
   */
  async function answerWith(request: InboundRequest, services: TriggerServices, status: number, mdnInput: Omit<MdnInput, 'headers' | 'reportingUa'> & { failure: NonNullable<MdnInput['failure']> }, message: Buffer | null, keep: Keep): Promise<Answer> {
    const mdn = await makeMdn(request, mdnInput);
    const messageId = request.headers['message-id'];
    if (messageId && keep) {
      try {
        await keepEvidence(services.store, evidenceFolder(request.workflowId, messageId, request.requestId), message && messageEntity(request.headers, message), mdnEntity(mdn));
      } catch (error) {
        services.logger.error('AS2 evidence could not be stored', { workflowId: request.workflowId, messageId, error });
        if (keep === 'or-withhold') {
          log(services, request, 'as2.mdn-withheld', { reason: 'the failure MDN could not be kept, and a processed MDN for this message may be delivered asynchronously' }, 'warn');
          return BUSY;
        }
      }
    }
    return sent(request, services, status, mdn, `processed/error: ${mdnInput.failure.modifier}`);
  }

  function failureAnswer(request: InboundRequest, services: TriggerServices, fault: As2Fault, identity: As2Identity | null, message: Buffer | null, keep: Keep): Promise<Answer> {
    log(services, request, 'as2.failure', { code: fault.code, disposition: fault.modifier, detail: fault.message, ...(fault.reason ? { reason: fault.reason } : {}) }, 'warn');
    const options = parseMdnOptions(request.headers['disposition-notification-options']);
    return answerWith(request, services, fault.status, {
      failure: { modifier: fault.modifier, detail: fault.message }, mic: null, micalg: chooseMicalg(options, null, limits.allowMd5), options, identity,
    }, message, keep);
  }

  /** The inspection of a message whose room in the budget `share` holds (the caller releases it). */
  async function inspectHeld(request: InboundRequest, node: WorkflowNode, message: Buffer | 'busy' | null, share: HeldShare, services: TriggerServices): Promise<InspectOutcome> {
    const identity = await identityFor(request, node, services);
    if (message === 'busy' || message === null) {
      // No room to hold it now (or nothing held): nothing accepted, the partner sends it again.
      const fault = new As2Fault('not-accepted', 'the message could not be taken for processing now; send it again later');
      return { ok: false, answer: await failureAnswer(request, services, fault, identity, null, false) };
    }
    if (!identity) return { ok: false, answer: await failureAnswer(request, services, new As2Fault('credential-unavailable', 'the receiver cannot open messages right now'), null, message, false) };
    // The sender is authenticated once a signature verified with the pinned partner certificate.
    let authenticated = false;
    let unwrapped;
    try {
      // Everything the decoder will do but staging (attachments, transfer encodings): what is answered
      // processed opens in the decoder too.
      unwrapped = await unwrapMessage(message, request.headers['content-type'] ?? null, request.headers['content-transfer-encoding'] ?? null, {
        identity, maxInflatedBytes: limits.maxInflatedBytes, allowMd5: limits.allowMd5, multipleAttachments: hasMultipleAttachments(request.headers), share, receivedAt: request.receivedAt,
        onStep: (step, detail) => {
          if (step === 'verify-success' && identity.pinned) authenticated = true;
          log(services, request, `as2.${step}`, detail ? { detail } : {}, step.endsWith('failure') ? 'warn' : 'info');
        },
      });
    } catch (error) {
      if (!(error instanceof As2Fault)) services.logger.error('AS2 message failed unexpectedly', { workflowId: request.workflowId, requestId: request.requestId, error });
      const fault = asFault(error);
      // Refused for want of room (its share given back already, room.ts): answered as a message that found no
      // room at all is, above, keeping no evidence. Nothing of it was accepted, and a store write here would
      // hold its bytes, uncounted, for as long as the store takes, while the room it gave back admits the next.
      // Any other fault keeps its room until its evidence is kept (the caller releases it).
      if (fault.code === 'not-accepted') return { ok: false, answer: await failureAnswer(request, services, fault, identity, null, false) };
      return { ok: false, answer: await failureAnswer(request, services, fault, identity, message, authenticated) };
    }
    if (isMdn(unwrapped.payload)) {
      // An MDN sent here (a partner's async MDN URL pointed at this hook) is no business document: it would
      // start a workflow with a receipt as its payload. Refused, and never answered with an MDN (MDNs are not
      // generated in response to MDNs, RFC 3798); nothing is accepted.
      log(services, request, 'as2.mdn-refused', { detail: 'the message is an MDN' }, 'warn');
      return { ok: false, answer: errorAnswer('as2-mdn-not-accepted') };
    }
    if (decodedBytesBound(request.workflowId, request.headers, unwrapped.attachments) > MAX_RECORD_BYTES) {
      // Every attachment's item repeats the envelope's headers: so many of them could not be decoded.
      const fault = new As2Fault('malformed-message', `${unwrapped.attachments.length} attachments with these headers would not fit one record`);
      return { ok: false, answer: await failureAnswer(request, services, fault, identity, message, authenticated) };
    }
    const options = parseMdnOptions(request.headers['disposition-notification-options']);
    const micalg = chooseMicalg(options, unwrapped.signerDigest, limits.allowMd5);
    const mic = await computeMic(unwrapped.micContent, micAlgorithm(options, unwrapped.signerDigest, limits.allowMd5));
    // The processed MDN is made before the durable accept and travels in the received record, so what is
    // answered once the record is durable is already in the log, byte for byte (Message-ID and Date
    // included); the decoder keeps it as evidence from there. It is sent only if the append succeeds.
    const mdn = await makeMdn(request, { failure: null, mic, micalg, options, identity });
    // Checked at admit already; the credential read again here is the same cached document.
    const target = asyncMdnTarget(request.headers, identity, as2Parameters(node));
    if (target instanceof As2Fault) return { ok: false, answer: await failureAnswer(request, services, target, identity, message, authenticated) };
    const as2: As2Envelope = {
      messageId: request.headers['message-id'], from: request.headers['as2-from'], to: request.headers['as2-to'],
      subject: request.headers.subject ?? null, contentType: parseMediaType(unwrapped.payload.headers['content-type']).type || null,
      mdn: mdnEntity(mdn), asyncMdn: target,
      // The decoder opens the message with this key again, whatever a rotation did to the credential since (rotation.ts).
      receiverKey: unwrapped.receiverKey,
    };
    const state: Accepted = { identity, message, mdn, asyncMdn: target };
    return { ok: true, inspection: { as2, state } };
  }

  return {
    nodeTypes: ['webhook'],

    kindOf: () => 'as2',

    async admit(request, node, services) {
      const params = webhookParameters(node);
      // Ignore Bots applies as on HTTP (AS2 servers are not bots to the matcher); a bot gets no MDN.
      if (params.options.ignoreBots && isBotUserAgent(request.headers['user-agent'])) return { ok: false, answer: errorAnswer('bot-rejected') };
      const admitted = await authenticate(request, node, params, services);
      if (!admitted.ok) return admitted;
      const fault = envelopeFault(request.headers, as2Parameters(node));
      // Refused before the sender could be authenticated: logged, no evidence stored (evidence.ts).
      if (fault) return { ok: false, answer: await failureAnswer(request, services, fault, await identityFor(request, node, services), null, false) };
      if (request.headers['receipt-delivery-option']) {
        // An asynchronous MDN to a URL no allow-list names is refused before the body is read: nothing is accepted.
        const identity = await identityFor(request, node, services);
        const target = identity ? asyncMdnTarget(request.headers, identity, as2Parameters(node)) : new As2Fault('credential-unavailable', 'the receiver cannot open messages right now');
        if (target instanceof As2Fault) return { ok: false, answer: await failureAnswer(request, services, target, identity, null, false) };
      }
      // No principal: AS2-From is only a claim until the signature is verified, after the body is read, and a
      // stranger naming a partner must not spend that partner's rate limit (rateLimit.perPrincipal).
      return { ok: true, principal: null, secretHeaders: [], callbackUrlHeaders: CALLBACK_URL_HEADERS };
    },

    validator: (request) => whole.validator(request),

    async inspect(request, node, body, services) {
      // The message keeps its room in the budget while it is opened, and every layer made of it takes more
      // (unwrap.ts), until the MDN is made or the message refused: six 40 MB messages used to hold 500 MB more
      // than the budget said.
      const { bytes: message, share } = whole.hold(request, body);
      try {
        return await inspectHeld(request, node, message, share, services);
      } finally {
        share.release();
      }
    },

    accepted(request, _node, _body, inspection, services) {
      log(services, request, 'as2.queue-send-success');
      const state = inspection.state as Accepted;
      if (state.asyncMdn) {
        // RFC 4130 §7.3: the HTTP answer is empty; the processed MDN in the record goes to the URL (services/mdn/).
        log(services, request, 'as2.mdn-async-queued', { disposition: 'processed', mdnMessageId: state.mdn.messageId, url: loggableUrl(state.asyncMdn.url) });
        return { status: 200, headers: {}, body: Buffer.alloc(0), outcome: 'processed' };
      }
      return sent(request, services, 200, state.mdn, 'processed');
    },

    async notAccepted(request, node, inspection: Inspection, services) {
      const state = inspection.state as Accepted | undefined;
      log(services, request, 'as2.queue-send-failure', {}, 'warn');
      const fault = new As2Fault('not-accepted', 'the message could not be stored for processing; send it again later');
      // Refused before inspection (the accept gate full, the claim check not stored): the receipt is
      // still signed when the partner asked for a signed one.
      const identity = state ? state.identity : await identityFor(request, node, services);
      // The append may have reached the log although it was reported failed; with an asynchronous MDN asked
      // for, the mdn stage would then deliver the recorded processed MDN unless this failure MDN is kept.
      const keep: Keep = !state ? false : state.asyncMdn ? 'or-withhold' : true;
      return failureAnswer(request, services, fault, identity, state?.message ?? null, keep);
    },

    decode: (received, node, services) => decodeAs2(received, as2Parameters(node).credentialId, limits, services),

    validateNode: (node) => [...parameterProblems(node, `node "${node.name}"`), ...as2ParameterProblems(node), ...idempotencyUnsupported(node, `node "${node.name}"`)],
  };
}
