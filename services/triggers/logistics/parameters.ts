import type { WorkflowNode } from '../../platform/registry/documents';
import { LOGISTICS_EVENTS, type LogisticsEvent } from './universal';

/**
 * A `logisticsTrigger` node's parameters (SPEC §2.3, DESIGN.md §5). The trigger takes no credential
 * of the platform's (SPEC §1.5), but a node may still ask callers to authenticate (SPEC §5.4 leaves it
 * open): Basic or Header Auth on the HTTP request, or the WS-Security UsernameToken the eAdaptor can
 * send, checked against a `basicAuth` credential named under `credentials.wsUsernameToken`.
 */
export type LogisticsAuthentication = 'none' | 'basicAuth' | 'headerAuth' | 'wsUsernameToken';
const AUTH: readonly LogisticsAuthentication[] = ['none', 'basicAuth', 'headerAuth', 'wsUsernameToken'];

export interface LogisticsParameters {
  actions: ReadonlySet<LogisticsEvent>;
  rawBody: boolean;
  /** `invalid` when the document names an option we do not know: that fails closed. */
  authentication: LogisticsAuthentication | 'invalid';
}

const cache = new WeakMap<WorkflowNode, LogisticsParameters>();

export function logisticsParameters(node: WorkflowNode): LogisticsParameters {
  const hit = cache.get(node);
  if (hit) return hit;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const o = (typeof p.options === 'object' && p.options !== null ? p.options : {}) as Record<string, unknown>;
  const actions = Array.isArray(p.actions) ? p.actions.filter((a): a is LogisticsEvent => LOGISTICS_EVENTS.includes(a as LogisticsEvent)) : [];
  const auth = p.authentication === undefined ? 'none' : AUTH.includes(p.authentication as LogisticsAuthentication) ? p.authentication as LogisticsAuthentication : 'invalid';
  const params: LogisticsParameters = { actions: new Set(actions), rawBody: o.rawBody === true, authentication: auth };
  cache.set(node, params);
  return params;
}

export function logisticsProblems(node: WorkflowNode): string[] {
  const at = `node "${node.name}"`;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  if (!Array.isArray(p.actions) || p.actions.length === 0 || p.actions.some((a) => !LOGISTICS_EVENTS.includes(a as LogisticsEvent))) {
    problems.push(`${at}.parameters.actions must be a non-empty list of ${LOGISTICS_EVENTS.join(', ')}`);
  }
  const auth = logisticsParameters(node).authentication;
  if (auth === 'invalid') problems.push(`${at}.parameters.authentication must be one of ${AUTH.join(', ')}`);
  else if (auth !== 'none' && !node.credentials?.[auth]) problems.push(`${at}.credentials.${auth} must name the credential to check callers against`);
  return problems;
}
