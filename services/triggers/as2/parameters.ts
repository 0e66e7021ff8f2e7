import type { WorkflowNode } from '../../platform/registry/documents';
import { asyncMdnUrlProblems } from '../../platform/registry/as2-credential';
import { parsePrefix, prefixProblem, type UrlPrefix } from '../../platform/net/url-allow-list';

/** The AS2-only parameters of a webhook node in Protocol AS2 (SPEC §2.1). */
export interface As2Parameters {
  expectedAs2From: string | null;
  expectedAs2To: string | null;
  credentialId: string | null;
  /**
   * `parameters.asyncMdnUrls`: URL prefixes this node's partners may ask asynchronous MDNs to be delivered to,
   * besides the credential's (docs/as2-async-mdn.md). Entries `workflows put` refused are left out here.
   */
  asyncMdnUrls: UrlPrefix[];
}

export function as2Parameters(node: WorkflowNode): As2Parameters {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
  const urls = Array.isArray(p.asyncMdnUrls) ? p.asyncMdnUrls.filter((u): u is string => prefixProblem(u) === null) : [];
  return { expectedAs2From: text(p.expectedAs2From), expectedAs2To: text(p.expectedAs2To), credentialId: node.credentials?.as2ReceiverAuth ?? null, asyncMdnUrls: urls.map(parsePrefix) };
}

/** Problems with an AS2 node, for `workflows put`. */
export function as2ParameterProblems(node: WorkflowNode): string[] {
  const at = `node "${node.name}"`;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const o = (typeof p.options === 'object' && p.options !== null ? p.options : {}) as Record<string, unknown>;
  const problems: string[] = [];
  if (p.authentication !== 'as2ReceiverAuth') problems.push(`${at}.parameters.authentication must be as2ReceiverAuth when the protocol is as2`);
  if (!node.credentials?.as2ReceiverAuth) problems.push(`${at}.credentials.as2ReceiverAuth must name the AS2 receiver credential`);
  for (const field of ['expectedAs2From', 'expectedAs2To']) {
    const v = p[field];
    if (v !== undefined && v !== null && (typeof v !== 'string' || /[\r\n]/.test(v))) problems.push(`${at}.parameters.${field} must be a single-line string or null`);
  }
  problems.push(...asyncMdnUrlProblems(`${at}.parameters.asyncMdnUrls`, p.asyncMdnUrls));
  for (const option of ['rawBody', 'binaryData', 'responseData', 'responseHeaders', 'noResponseBody']) {
    if (o[option] !== undefined && o[option] !== false && o[option] !== null) problems.push(`${at}.parameters.options.${option} does not apply to AS2 (the answer is an MDN and payloads are always stored)`);
  }
  return problems;
}
