import { createHash, type KeyObject } from 'node:crypto';
import type { WorkflowNode } from '../../platform/registry/documents';
import { errorAnswer } from '../answers';
import { checkHeaderAuth, nodeCredential } from '../header-auth';
import type { Admission, InboundRequest, TriggerServices } from '../trigger';
import type { WebhookParameters } from './parameters';
import { rsaPublicKey, SIGNATURE_HEADER } from './signature';
import { firstSighting } from '../first-sighting';
import { verifyBearer } from './auth/jwt';
import type { SignedBodies } from './auth/signed-bodies';

/**
 * Header-level authentication of a webhook request (SPEC §5): missing → 401, wrong → 403,
 * a referenced credential that is missing or unreadable → fail closed with 500.
 */
export function authenticate(request: InboundRequest, node: WorkflowNode, params: WebhookParameters, services: TriggerServices, signed?: SignedBodies): Admission | Promise<Admission> {
  if (params.protocol === 'as2' && params.authentication !== 'as2ReceiverAuth') return { ok: false, answer: errorAnswer('protocol-requires-as2-auth') };
  if (params.authentication === 'as2ReceiverAuth' && params.protocol !== 'as2') {
    // Only the AS2 trigger checks AS2 Receiver Auth: over HTTP nothing would, and the hook would be open.
    // `workflows put` refuses this node; one stored before fails closed.
    services.logger.error('AS2 Receiver Auth on a trigger whose protocol is not as2: refusing', { node: node.name, workflowId: request.workflowId });
    return { ok: false, answer: errorAnswer('credential-unavailable') };
  }
  // AS2 is checked in the AS2 trigger. Nothing to wait for: no promise.
  if (params.authentication === 'none' || params.authentication === 'as2ReceiverAuth') return { ok: true, principal: null, secretHeaders: [] };
  if (params.authentication === 'rsaSignature') return signatureAdmission(request, node, services);
  if (params.authentication === 'jwt') return jwtAdmission(request, node, services);
  if (params.authentication === 'standardWebhooks' || params.authentication === 'hmac') {
    // Only the webhook trigger verifies these (it feeds them the body); any other caller fails closed.
    return signed ? signed.admit(request, node, params.authentication, services) : { ok: false, answer: errorAnswer('credential-unavailable') };
  }
  return checkHeaderAuth(request, node, params.authentication, services).then((outcome) => (outcome.ok ? outcome : { ok: false, answer: errorAnswer(outcome.code) }));
}

/**
 * A credential's broken key is logged at error once per process (then at debug) until the credential works again;
 * by its PEM's hash too, so a key put anew, still broken, is reported anew.
 */
const unreadableKeyFirstSeen = firstSighting();

/**
 * A node's RSA credential: its public key and the header the signature comes in; null (logged) when unusable,
 * a key that no longer reads included: that is a 500 for the operator, not a 403 telling the partner its
 * signature is wrong. The log names the credential, never the key.
 */
export async function signatureCredential(request: InboundRequest, node: WorkflowNode, services: TriggerServices): Promise<{ publicKey: KeyObject; header: string } | null> {
  const credential = await nodeCredential(node, 'rsaSignature', request.workflowId, services);
  if (credential?.type !== 'rsaSignature') return null;
  const publicKey = rsaPublicKey(credential.data.publicKey);
  const credentialId = node.credentials?.rsaSignature ?? '';
  if (!publicKey) {
    const first = unreadableKeyFirstSeen.changed(createHash('sha256').update(String(credential.data.publicKey)).digest('base64'), credentialId);
    services.logger[first ? 'error' : 'debug']('rsaSignature credential holds no readable RSA public key: refusing', {
      credentialId, node: node.name, workflowId: request.workflowId, ...(first ? {} : { repeated: true }),
    });
    return null;
  }
  unreadableKeyFirstSeen.forget(credentialId);
  return { publicKey, header: (credential.data.header || SIGNATURE_HEADER).toLowerCase() };
}

/**
 * An RSA signature is verified on the body (inspect). Before the body is read, a request without the
 * signature's header is refused (401), and so is every request while the credential cannot be used (500),
 * so that neither has its body read and staged. The header is named for redaction: with its body, a
 * signature kept in the received record would be a request to replay.
 */
async function signatureAdmission(request: InboundRequest, node: WorkflowNode, services: TriggerServices): Promise<Admission> {
  const credential = await signatureCredential(request, node, services);
  if (!credential) return { ok: false, answer: errorAnswer('credential-unavailable') };
  if (request.headers[credential.header] === undefined) return { ok: false, answer: errorAnswer('authorization-required') };
  return { ok: true, principal: null, secretHeaders: [credential.header] };
}

/** A JWT bearer token, verified on the headers alone (auth/jwt.ts); its `sub` is the principal. */
async function jwtAdmission(request: InboundRequest, node: WorkflowNode, services: TriggerServices): Promise<Admission> {
  const credential = await nodeCredential(node, 'jwt', request.workflowId, services);
  if (credential?.type !== 'jwt') return { ok: false, answer: errorAnswer('credential-unavailable') };
  const outcome = await verifyBearer(request.headers.authorization, credential.data, Date.now());
  if (!outcome.ok) return { ok: false, answer: errorAnswer(outcome.code, undefined, outcome.code === 'authorization-required' ? { 'www-authenticate': 'Bearer' } : {}) };
  return { ok: true, principal: outcome.principal, secretHeaders: ['authorization'] };
}
