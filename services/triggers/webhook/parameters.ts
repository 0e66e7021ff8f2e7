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

/** The options webhookParameters reads from `parameters.options`, each with the kind of value it takes. */
const OPTION_KINDS: Record<string, 'boolean' | 'string' | 'headers'> = {
  ignoreBots: 'boolean', rawBody: 'boolean', noResponseBody: 'boolean', binaryData: 'boolean',
  responseData: 'string', binaryPropertyName: 'string', responseHeaders: 'headers',
};
/** Options checked where they are read (admission-options.ts, idempotency.ts). */
const OTHER_OPTIONS = ['ipAllowList', 'trustedProxyHops', 'rateLimit', 'idempotencyKey', 'idempotencyWindowHours'];
const KNOWN_OPTIONS = [...Object.keys(OPTION_KINDS), ...OTHER_OPTIONS];
/** Options also read from `parameters` itself (older documents put them there). */
const ALSO_IN_PARAMETERS = new Set(['binaryData', 'binaryPropertyName', 'ipAllowList', 'trustedProxyHops', 'rateLimit']);
const KIND_TEXT = { boolean: 'true or false', string: 'a string', headers: 'a list of {"name", "value"} strings' };

/**
 * An option that would be ignored as written: of the wrong kind, misspelt in its case, or one level too high.
 * Other keys are left alone (workflows exported from elsewhere carry options this service does not have).
 */
function optionProblems(p: Record<string, unknown>, at: string): string[] {
  if (p.options === undefined) return [];
  if (typeof p.options !== 'object' || p.options === null || Array.isArray(p.options)) return [`${at}.parameters.options must be an object`];
  const o = p.options as Record<string, unknown>;
  const problems: string[] = [];
  for (const [name, kind] of Object.entries(OPTION_KINDS)) {
    const v = o[name];
    if (v === undefined) continue;
    const fits = kind === 'boolean' ? typeof v === 'boolean' : kind === 'string' ? typeof v === 'string'
      : Array.isArray(v) && v.every((h) => typeof h?.name === 'string' && typeof h?.value === 'string');
    if (!fits) problems.push(`${at}.parameters.options.${name} must be ${KIND_TEXT[kind]}`);
  }
  for (const key of Object.keys(o)) {
    const meant = KNOWN_OPTIONS.find((k) => k !== key && k.toLowerCase() === key.toLowerCase());
    if (meant) problems.push(`${at}.parameters.options.${key} is not an option: did you mean ${meant}?`);
  }
  return problems;
}

/** Problems with the parameters themselves, for `workflows put`. */
export function parameterProblems(node: WorkflowNode, at: string): string[] {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const problems: string[] = optionProblems(p, at);
  for (const name of KNOWN_OPTIONS) {
    if (p[name] !== undefined && !ALSO_IN_PARAMETERS.has(name)) problems.push(`${at}.parameters.${name} is an option: put it in parameters.options, where it is read`);
  }
  if (p.authentication !== undefined && !(typeof p.authentication === 'string' && AUTH.has(p.authentication))) {
    problems.push(`${at}.parameters.authentication must be one of ${[...AUTH].join(', ')}`);
  }
  const auth = webhookParameters(node).authentication;
  if (auth !== 'none' && auth !== 'invalid' && !node.credentials?.[auth]) problems.push(`${at}.credentials.${auth} must name the credential to check callers against`);
  if (p.protocol !== undefined && !['http', 'as2'].includes(String(p.protocol).toLowerCase())) problems.push(`${at}.parameters.protocol must be http or as2`);
  else if (auth === 'as2ReceiverAuth' && webhookParameters(node).protocol !== 'as2') problems.push(`${at}.parameters.authentication as2ReceiverAuth needs parameters.protocol "as2" (over HTTP nothing would check it)`);
  return problems;
}
