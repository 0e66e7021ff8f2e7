import type { WorkflowNode } from '../../platform/registry/documents';
import { errorAnswer } from '../answers';
import { checkHeaderAuth } from '../header-auth';
import type { Admission, InboundRequest, TriggerServices } from '../trigger';
import type { WebhookParameters } from './parameters';
import { SIGNATURE_HEADER } from './signature';

/**
 * Header-level authentication of a webhook request (SPEC §5): missing → 401, wrong → 403,
 * a referenced credential that is missing or unreadable → fail closed with 500.
 */
export function authenticate(request: InboundRequest, node: WorkflowNode, params: WebhookParameters, services: TriggerServices): Admission | Promise<Admission> {
  if (params.protocol === 'as2' && params.authentication !== 'as2ReceiverAuth') return { ok: false, answer: errorAnswer('protocol-requires-as2-auth') };
  // AS2 is checked in the AS2 trigger. Nothing to wait for: no promise.
  if (params.authentication === 'none' || params.authentication === 'as2ReceiverAuth') return { ok: true, principal: null, secretHeaders: [] };
  // RSA signatures are checked on the body (inspect); here only the header they come in is named, so the
  // received record does not keep a signature that, with its body, would be a request to replay.
  if (params.authentication === 'rsaSignature') return signatureHeader(node, services).then((header) => ({ ok: true, principal: null, secretHeaders: [header] }));
  return checkHeaderAuth(request, node, params.authentication, services).then((outcome) => (outcome.ok ? outcome : { ok: false, answer: errorAnswer(outcome.code) }));
}

/** The header a node's RSA credential names (X-Signature unless it says otherwise); inspect() fails closed on a bad credential. */
async function signatureHeader(node: WorkflowNode, services: TriggerServices): Promise<string> {
  const id = node.credentials?.rsaSignature;
  const credential = id ? await services.credential(id).catch(() => null) : null;
  return (credential?.type === 'rsaSignature' && credential.data.header ? credential.data.header : SIGNATURE_HEADER).toLowerCase();
}
