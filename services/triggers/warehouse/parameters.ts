import type { WorkflowNode } from '../../platform/registry/documents';
import type { CredentialCheck } from '../header-auth';

/**
 * A `warehouseTrigger` node's parameters (SPEC §2.4, DESIGN.md §5). The provider's posts carry no
 * credential of ours (SPEC §1.5); a node may still require Basic or Header Auth (SPEC §5.4 leaves it
 * open), which the provider's webhook settings can send.
 */
export type WarehouseAction = 'dc' | 'rc';
export const WAREHOUSE_ACTIONS: readonly WarehouseAction[] = ['dc', 'rc'];
const AUTH: readonly CredentialCheck[] = ['none', 'basicAuth', 'headerAuth'];

export interface WarehouseParameters {
  actions: ReadonlySet<WarehouseAction>;
  authentication: CredentialCheck | 'invalid';
}

const cache = new WeakMap<WorkflowNode, WarehouseParameters>();

export function warehouseParameters(node: WorkflowNode): WarehouseParameters {
  const hit = cache.get(node);
  if (hit) return hit;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const actions = Array.isArray(p.actions) ? p.actions.filter((a): a is WarehouseAction => WAREHOUSE_ACTIONS.includes(a as WarehouseAction)) : [];
  const auth = p.authentication === undefined ? 'none' : AUTH.includes(p.authentication as CredentialCheck) ? p.authentication as CredentialCheck : 'invalid';
  const params: WarehouseParameters = { actions: new Set(actions), authentication: auth };
  cache.set(node, params);
  return params;
}

export function warehouseProblems(node: WorkflowNode): string[] {
  const at = `node "${node.name}"`;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  if (!Array.isArray(p.actions) || p.actions.length === 0 || p.actions.some((a) => !WAREHOUSE_ACTIONS.includes(a as WarehouseAction))) {
    problems.push(`${at}.parameters.actions must be a non-empty list of ${WAREHOUSE_ACTIONS.join(', ')}`);
  }
  const auth = warehouseParameters(node).authentication;
  if (auth === 'invalid') problems.push(`${at}.parameters.authentication must be one of ${AUTH.join(', ')}`);
  else if (auth !== 'none' && !node.credentials?.[auth]) problems.push(`${at}.credentials.${auth} must name the credential to check callers against`);
  return problems;
}
