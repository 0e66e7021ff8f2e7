import type { WorkflowNode } from '../../platform/registry/documents';

/** A webhook node's parameters with their documented defaults (SPEC §2.1). */
export interface WebhookParameters {
  authentication: 'none' | 'basicAuth' | 'headerAuth' | 'as2ReceiverAuth' | 'rsaSignature';
  protocol: 'http' | 'as2';
  options: {
    ignoreBots: boolean;
    rawBody: boolean;
    noResponseBody: boolean;
    responseData: string | null;
    responseHeaders: { name: string; value: string }[];
  };
}

const AUTH = new Set(['none', 'basicAuth', 'headerAuth', 'as2ReceiverAuth', 'rsaSignature']);

export function webhookParameters(node: WorkflowNode): WebhookParameters {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const o = (typeof p.options === 'object' && p.options !== null ? p.options : {}) as Record<string, unknown>;
  const auth = typeof p.authentication === 'string' && AUTH.has(p.authentication) ? p.authentication : 'none';
  return {
    authentication: auth as WebhookParameters['authentication'],
    protocol: String(p.protocol ?? 'http').toLowerCase() === 'as2' ? 'as2' : 'http',
    options: {
      ignoreBots: o.ignoreBots === true,
      rawBody: o.rawBody === true,
      noResponseBody: o.noResponseBody === true,
      responseData: typeof o.responseData === 'string' ? o.responseData : null,
      responseHeaders: Array.isArray(o.responseHeaders)
        ? o.responseHeaders.filter((h): h is { name: string; value: string } => typeof h?.name === 'string' && typeof h?.value === 'string')
        : [],
    },
  };
}
