import type { WorkflowNode } from '../../platform/registry/documents';
import { errorAnswer } from '../answers';
import { secretsEqual } from '../secret-compare';
import type { Admission, InboundRequest, TriggerServices } from '../trigger';
import type { WebhookParameters } from './parameters';

/**
 * Header-level authentication of a webhook request (SPEC §5): missing → 401, wrong → 403,
 * a referenced credential that is missing or unreadable → fail closed with 500.
 */
export async function authenticate(request: InboundRequest, node: WorkflowNode, params: WebhookParameters, services: TriggerServices): Promise<Admission> {
  if (params.protocol === 'as2' && params.authentication !== 'as2ReceiverAuth') return { ok: false, answer: errorAnswer('protocol-requires-as2-auth') };
  if (params.authentication === 'none') return { ok: true, principal: null, secretHeaders: [] };
  if (params.authentication === 'invalid') {
    services.logger.error('trigger node names an unknown authentication option; refusing', { node: node.name, workflowId: request.workflowId });
    return { ok: false, answer: errorAnswer('credential-unavailable') };
  }

  const credentialId = node.credentials?.[params.authentication];
  const credential = credentialId ? await services.credential(credentialId).catch((error: Error) => {
    services.logger.error('credential cannot be read', { credentialId, node: node.name, error });
    return undefined;
  }) : null;
  if (!credential || credential.type !== params.authentication) {
    if (credential !== undefined) services.logger.error('trigger credential is missing or of the wrong type', { credentialId: credentialId ?? null, node: node.name, expected: params.authentication });
    return { ok: false, answer: errorAnswer('credential-unavailable') };
  }

  switch (credential.type) {
    case 'basicAuth': {
      const header = request.headers.authorization;
      const match = header ? /^Basic\s+([A-Za-z0-9+/=._~-]*)\s*$/i.exec(header) : null;
      if (!header) return { ok: false, answer: errorAnswer('authorization-required') };
      if (!match) return { ok: false, answer: errorAnswer('authorization-wrong') };
      const decoded = Buffer.from(match[1], 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const user = colon >= 0 ? decoded.slice(0, colon) : decoded;
      const password = colon >= 0 ? decoded.slice(colon + 1) : '';
      // Both compared, always, so the time does not tell which one was wrong.
      const userOk = secretsEqual(user, credential.data.user);
      const passwordOk = secretsEqual(password, credential.data.password);
      return userOk && passwordOk && colon >= 0
        ? { ok: true, principal: `basic:${credential.data.user}`, secretHeaders: ['authorization'] }
        : { ok: false, answer: errorAnswer('authorization-wrong') };
    }
    case 'headerAuth': {
      const name = credential.data.name.toLowerCase();
      const value = request.headers[name];
      if (value === undefined) return { ok: false, answer: errorAnswer('authorization-required') };
      return secretsEqual(value, credential.data.value)
        ? { ok: true, principal: `header:${credential.data.name}`, secretHeaders: [name] }
        : { ok: false, answer: errorAnswer('authorization-wrong') };
    }
    default:
      // RSA signatures are checked on the body (inspect); AS2 in the AS2 trigger.
      return { ok: true, principal: null, secretHeaders: [] };
  }
}
