import type { WorkflowNode } from '../../platform/registry/documents';

/** A webhook node's parameters with their documented defaults (SPEC §2.1). */
export interface WebhookParameters {
  /** `invalid` when the document names an option we do not know: that fails closed, never as None. */
  authentication: 'none' | 'basicAuth' | 'headerAuth' | 'as2ReceiverAuth' | 'rsaSignature' | 'standardWebhooks' | 'hmac' | 'jwt' | 'invalid';
  protocol: 'http' | 'as2';
  options: {
    ignoreBots: boolean;
    rawBody: boolean;
    noResponseBody: boolean;
    responseData: string | null;
    responseHeaders: { name: string; value: string }[];
    /** Legacy Binary Data (HTTP only): the body stored as a file under `binaryPropertyName`. */
    binaryData: boolean;
    binaryPropertyName: string;
  };
}

const AUTH = new Set(['none', 'basicAuth', 'headerAuth', 'as2ReceiverAuth', 'rsaSignature', 'standardWebhooks', 'hmac', 'jwt']);
const cache = new WeakMap<WorkflowNode, WebhookParameters>();

export function webhookParameters(node: WorkflowNode): WebhookParameters {
  const hit = cache.get(node);
  if (hit) return hit;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const o = (typeof p.options === 'object' && p.options !== null ? p.options : {}) as Record<string, unknown>;
  const auth = p.authentication === undefined ? 'none' : typeof p.authentication === 'string' && AUTH.has(p.authentication) ? p.authentication : 'invalid';
  const protocol = String(p.protocol ?? 'http').toLowerCase() === 'as2' ? 'as2' : 'http';
  const binaryProperty = typeof o.binaryPropertyName === 'string' && o.binaryPropertyName.trim() !== '' ? o.binaryPropertyName.trim() : 'data';
  const params: WebhookParameters = {
    authentication: auth as WebhookParameters['authentication'],
    protocol,
    options: {
      ignoreBots: o.ignoreBots === true,
      rawBody: o.rawBody === true,
      noResponseBody: o.noResponseBody === true,
      responseData: typeof o.responseData === 'string' && o.responseData !== '' ? o.responseData : null,
      responseHeaders: Array.isArray(o.responseHeaders)
        ? o.responseHeaders.filter((h): h is { name: string; value: string } => typeof h?.name === 'string' && typeof h?.value === 'string')
        : [],
      binaryData: protocol === 'http' && (o.binaryData === true || p.binaryData === true),
      binaryPropertyName: typeof p.binaryPropertyName === 'string' && p.binaryPropertyName.trim() !== '' ? p.binaryPropertyName.trim() : binaryProperty,
    },
  };
  cache.set(node, params);
  return params;
}

/** Problems with the parameters themselves, for `workflows put`. */
export function parameterProblems(node: WorkflowNode, at: string): string[] {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  if (p.authentication !== undefined && !(typeof p.authentication === 'string' && AUTH.has(p.authentication))) {
    problems.push(`${at}.parameters.authentication must be one of ${[...AUTH].join(', ')}`);
  }
  const auth = webhookParameters(node).authentication;
  if (auth !== 'none' && auth !== 'invalid' && !node.credentials?.[auth]) problems.push(`${at}.credentials.${auth} must name the credential to check callers against`);
  if (p.protocol !== undefined && !['http', 'as2'].includes(String(p.protocol).toLowerCase())) problems.push(`${at}.parameters.protocol must be http or as2`);
  else if (auth === 'as2ReceiverAuth' && webhookParameters(node).protocol !== 'as2') problems.push(`${at}.parameters.authentication as2ReceiverAuth needs parameters.protocol "as2" (over HTTP nothing would check it)`);
  return problems;
}
