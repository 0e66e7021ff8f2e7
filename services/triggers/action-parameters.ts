import type { WorkflowNode } from '../platform/registry/documents';

/**
 * The parameters the logistics and warehouse nodes share: `actions` (a multi-select of the event types
 * that start the workflow) and `authentication` (an option from a fixed list, `invalid` when the
 * document names another: that fails closed, never as none).
 */
export interface ActionParameters<A extends string, U extends string> {
  actions: ReadonlySet<A>;
  authentication: U | 'none' | 'invalid';
}

export function actionParameters<A extends string, U extends string>(node: WorkflowNode, allActions: readonly A[], allAuth: readonly U[]): ActionParameters<A, U> {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const actions = Array.isArray(p.actions) ? p.actions.filter((a): a is A => allActions.includes(a as A)) : [];
  const authentication = p.authentication === undefined || p.authentication === 'none' ? 'none' : allAuth.includes(p.authentication as U) ? p.authentication as U : 'invalid';
  return { actions: new Set(actions), authentication };
}

/** Problems with those parameters, for `workflows put`. */
export function actionParameterProblems<A extends string, U extends string>(node: WorkflowNode, allActions: readonly A[], allAuth: readonly U[]): string[] {
  const at = `node "${node.name}"`;
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  if (!Array.isArray(p.actions) || p.actions.length === 0 || p.actions.some((a) => !allActions.includes(a as A))) {
    problems.push(`${at}.parameters.actions must be a non-empty list of ${allActions.join(', ')}`);
  }
  const auth = actionParameters(node, allActions, allAuth).authentication;
  if (auth === 'invalid') problems.push(`${at}.parameters.authentication must be one of ${['none', ...allAuth].join(', ')}`);
  else if (auth !== 'none' && !node.credentials?.[auth]) problems.push(`${at}.credentials.${auth} must name the credential to check callers against`);
  return problems;
}
