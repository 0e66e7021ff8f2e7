import type { WorkflowNode } from '../../platform/registry/documents';
import { errorAnswer } from '../answers';
import { checkHeaderAuth } from '../header-auth';
import type { Admission, InboundRequest, TriggerServices } from '../trigger';
import type { WebhookParameters } from './parameters';

/**
 * Header-level authentication of a webhook request (SPEC §5): missing → 401, wrong → 403,
 * a referenced credential that is missing or unreadable → fail closed with 500.
 */
export function authenticate(request: InboundRequest, node: WorkflowNode, params: WebhookParameters, services: TriggerServices): Admission | Promise<Admission> {
  if (params.protocol === 'as2' && params.authentication !== 'as2ReceiverAuth') return { ok: false, answer: errorAnswer('protocol-requires-as2-auth') };
  // RSA signatures are checked on the body (inspect); AS2 in the AS2 trigger. Nothing to wait for: no promise.
  if (params.authentication === 'none' || params.authentication === 'rsaSignature' || params.authentication === 'as2ReceiverAuth') return { ok: true, principal: null, secretHeaders: [] };
  return checkHeaderAuth(request, node, params.authentication, services).then((outcome) => (outcome.ok ? outcome : { ok: false, answer: errorAnswer(outcome.code) }));
}
