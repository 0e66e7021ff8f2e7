import type { WorkflowNode } from '../../platform/registry/documents';
import { actionParameterProblems, actionParameters, type ActionParameters } from '../action-parameters';

/**
 * A `warehouseTrigger` node's parameters (SPEC §2.4, DESIGN.md §5). The provider's posts carry no
 * credential of ours (SPEC §1.5); a node may still require Basic or Header Auth (SPEC §5.4 leaves it
 * open), which the provider's webhook settings can send.
 */
export type WarehouseAction = 'dc' | 'rc';
export const WAREHOUSE_ACTIONS: readonly WarehouseAction[] = ['dc', 'rc'];
const AUTH = ['basicAuth', 'headerAuth'] as const;

export type WarehouseParameters = ActionParameters<WarehouseAction, (typeof AUTH)[number]>;

const cache = new WeakMap<WorkflowNode, WarehouseParameters>();

export function warehouseParameters(node: WorkflowNode): WarehouseParameters {
  const hit = cache.get(node);
  if (hit) return hit;
  const params = actionParameters(node, WAREHOUSE_ACTIONS, AUTH);
  cache.set(node, params);
  return params;
}

export const warehouseProblems = (node: WorkflowNode): string[] => actionParameterProblems(node, WAREHOUSE_ACTIONS, AUTH);
