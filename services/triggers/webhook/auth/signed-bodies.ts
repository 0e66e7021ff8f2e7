import type { CredentialDocument, WorkflowNode } from '../../../platform/registry/documents';
import { BUSY, errorAnswer, type Answer } from '../../answers';
import { nodeCredential } from '../../header-auth';
import { heldShare, type HeldBytes } from '../../held-bytes';
import type { Admission, BodyValidator, InboundRequest, InspectOutcome, ReceivedBody, TriggerServices } from '../../trigger';
import type { BodySignatureCheck, SignatureAdmission } from './body-signature';
import { hmacAdmission } from './hmac';
import { standardWebhooksAdmission } from './standard-webhooks';

/**
 * Standard Webhooks and HMAC signatures across the receiver's three steps, for one webhook trigger:
 * admission prepares the check from the headers (missing → 401, a timestamp out of its window → 403,
 * credential unusable → 500, all before the body is read); the body validator feeds it every raw chunk
 * as it arrives and gives the verdict after the last one (wrong → 403, and a staged body is deleted);
 * inspect runs what needs the whole body (Ed25519), then lets the trigger check the body itself.
 * The check is carried from step to step on the request object, which the receiver passes to each.
 */
export type SignedScheme = 'standardWebhooks' | 'hmac';
export const SIGNED_SCHEMES: ReadonlySet<string> = new Set<SignedScheme>(['standardWebhooks', 'hmac']);

type State = { check: BodySignatureCheck; verdict: 'pending' | 'verified' | 'wrong' | 'needs-whole-body' };

export interface SignedBodies {
  /** At once (no promise) when the credential is cached. */
  admit(request: InboundRequest, node: WorkflowNode, scheme: SignedScheme, services: TriggerServices): Admission | Promise<Admission>;
  validator(request: InboundRequest): BodyValidator;
  /** null when the signature holds; else the refusal. At once (no promise) unless the whole body must be checked (Ed25519). */
  verified(request: InboundRequest, body: ReceivedBody, services: TriggerServices): InspectOutcome | null | Promise<InspectOutcome | null>;
}

const refusal = (a: Extract<SignatureAdmission, { ok: false }>): Answer => errorAnswer(a.code, a.message);
const unavailable = (): InspectOutcome => ({ ok: false, answer: errorAnswer('credential-unavailable') });

/** `held`: the memory budget of all request bodies (held-bytes.ts), which a staged body read back for Ed25519 takes room in. */
export function createSignedBodies(held: HeldBytes, now: () => number = Date.now): SignedBodies {
  const states = new WeakMap<InboundRequest, State>();

  function admitWith(credential: CredentialDocument | null, request: InboundRequest, node: WorkflowNode, services: TriggerServices): Admission {
    let admission: SignatureAdmission;
    if (credential?.type === 'standardWebhooks') admission = standardWebhooksAdmission(request.headers, credential.data, now());
    else if (credential?.type === 'hmac') admission = hmacAdmission(request.headers, credential.data, now());
    else return { ok: false, answer: errorAnswer('credential-unavailable') };
    if (!admission.ok) {
      if (admission.code === 'credential-unavailable') services.logger.error('signature credential cannot be used (no usable secret or template); refusing', { credentialId: credential.id, node: node.name, workflowId: request.workflowId });
      return { ok: false, answer: refusal(admission) };
    }
    states.set(request, { check: admission.check, verdict: 'pending' });
    return { ok: true, principal: null, secretHeaders: admission.secretHeaders };
  }

  return {
    admit(request, node, scheme, services) {
      // The common case, a cached credential of the right type, is answered without a promise.
      const id = node.credentials?.[scheme];
      const cached = id ? services.cachedCredential?.(id) : undefined;
      if (cached && cached.type === scheme) return admitWith(cached, request, node, services);
      return nodeCredential(node, scheme, request.workflowId, services).then((credential) => admitWith(credential, request, node, services));
    },

    validator(request) {
      const state = states.get(request);
      return {
        write: (chunk) => { state?.check.update(chunk); return true; },
        once: (_e, listener) => listener(),
        end() {
          if (!state) return errorAnswer('credential-unavailable'); // admission did not prepare it: fail closed
          state.verdict = state.check.finish();
          return state.verdict === 'wrong' ? errorAnswer('authorization-wrong') : null;
        },
        abort: () => { states.delete(request); },
      };
    },

    verified(request, body, services) {
      const state = states.get(request);
      if (!state) return unavailable();
      if (state.verdict === 'verified') return null;
      if (state.verdict !== 'needs-whole-body' || !state.check.whole) return { ok: false, answer: errorAnswer('authorization-wrong') };
      return verifiedWhole(state, request, body, services);
    },
  };

  /**
   * Ed25519 signs the whole message: a staged body is read back once, and only for this. While it is read
   * and verified it takes room in the held-bytes budget, as a body kept whole by another trigger does
   * (whole-body.ts); else concurrent large v1a requests would hold memory without bound. With no room now
   * the request is answered busy (503: nothing accepted, the claim check deleted by the receiver), which the
   * sender retries. The room is taken only after the body has arrived, so a slow upload does not hold it.
   * An inline body takes none of its own: it is copied and verified in one synchronous step, so at most
   * one such copy exists at a time.
   */
  async function verifiedWhole(state: State, request: InboundRequest, body: ReceivedBody, services: TriggerServices): Promise<InspectOutcome | null> {
    const whole = state.check.whole!;
    if (body.inline) return verdictOf(whole.verify(Buffer.concat([whole.prefix, body.inline])));
    const size = whole.prefix.length + body.size;
    const share = heldShare(held);
    if (!share.take(size)) {
      services.logger.warn('bodies held in memory are at MAX_HELD_BODY_BYTES, request refused', { requestId: request.requestId, workflowId: request.workflowId, heldFor: 'v1a signature', bytes: size });
      return { ok: false, answer: BUSY };
    }
    try {
      let message: Buffer;
      try {
        message = await readBack(body, whole.prefix, size);
      } catch (error) {
        services.logger.error('a staged signed body could not be read back to verify its signature', { requestId: request.requestId, error });
        return { ok: false, answer: BUSY }; // nothing accepted; the sender retries
      }
      return verdictOf(whole.verify(message));
    } finally {
      share.release();
    }
  }
}

const verdictOf = (ok: boolean): InspectOutcome | null => (ok ? null : { ok: false, answer: errorAnswer('authorization-wrong') });

/**
 * The prefix and the staged body in one buffer of exactly `size` bytes, the room taken for it: a claim
 * check that is not the size received (changed in the store) is an error, never read past what was counted.
 */
async function readBack(body: ReceivedBody, prefix: Buffer, size: number): Promise<Buffer> {
  const message = Buffer.allocUnsafe(size);
  let at = prefix.copy(message);
  for await (const chunk of await body.readStaged!()) {
    const bytes = chunk as Buffer;
    if (at + bytes.length > size) throw new Error(`the staged body is larger than the ${body.size} bytes received`);
    at += bytes.copy(message, at);
  }
  if (at !== size) throw new Error(`the staged body is smaller than the ${body.size} bytes received`);
  return message;
}
