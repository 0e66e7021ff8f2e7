import type { WorkflowNode } from '../../platform/registry/documents';
import { actionParameterProblems, actionParameters, type ActionParameters } from '../action-parameters';
import { LOGISTICS_EVENTS, type LogisticsEvent } from './universal';

/**
 * A `logisticsTrigger` node's parameters (SPEC §2.3, DESIGN.md §5). The trigger takes no credential
 * of the platform's (SPEC §1.5), but a node may still ask callers to authenticate (SPEC §5.4 leaves it
 * open): Basic or Header Auth on the HTTP request, or the WS-Security UsernameToken the eAdaptor can
 * send, checked against a `basicAuth` credential named under `credentials.wsUsernameToken`.
 */
const AUTH = ['basicAuth', 'headerAuth', 'wsUsernameToken'] as const;
export type LogisticsAuthentication = (typeof AUTH)[number];

export interface LogisticsParameters extends ActionParameters<LogisticsEvent, LogisticsAuthentication> {
  rawBody: boolean;
}

const cache = new WeakMap<WorkflowNode, LogisticsParameters>();

export function logisticsParameters(node: WorkflowNode): LogisticsParameters {
  const hit = cache.get(node);
  if (hit) return hit;
  const o = (node.parameters as { options?: { rawBody?: unknown } } | undefined)?.options;
  const params = { ...actionParameters(node, LOGISTICS_EVENTS, AUTH), rawBody: o?.rawBody === true };
  cache.set(node, params);
  return params;
}

export const logisticsProblems = (node: WorkflowNode): string[] => actionParameterProblems(node, LOGISTICS_EVENTS, AUTH);
