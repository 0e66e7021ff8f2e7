import type { WorkflowDocument, WorkflowNode } from '../platform/registry/documents';
import type { TriggerPlugin } from './trigger';
import { NEVER_SELECTED } from './trigger';

/** The trigger kinds this build knows. Adding a kind is adding a plugin to the list it is made from. */
export interface TriggerCatalog {
  /** The node that drives a request: the first enabled trigger node that is not an error trigger. */
  select(workflow: WorkflowDocument): { node: WorkflowNode; plugin: TriggerPlugin } | null;
  pluginFor(nodeType: string): TriggerPlugin | null;
  /** Problems with the trigger nodes' configuration (templates, options), for `workflows put`. */
  validate(workflow: WorkflowDocument): string[];
}

export function createTriggerCatalog(plugins: TriggerPlugin[]): TriggerCatalog {
  const byType = new Map<string, TriggerPlugin>();
  for (const plugin of plugins) for (const type of plugin.nodeTypes) byType.set(type, plugin);
  return {
    select(workflow) {
      for (const node of workflow.nodes) {
        if (node.disabled || NEVER_SELECTED.has(node.type)) continue;
        const plugin = byType.get(node.type);
        if (plugin) return { node, plugin };
      }
      return null;
    },
    pluginFor: (type) => byType.get(type) ?? null,
    validate: (workflow) => workflow.nodes.flatMap((node) => {
      const plugin = byType.get(node.type);
      if (plugin) return plugin.validateNode?.(node) ?? [];
      const meant = nearMiss(node.type, byType);
      return meant === null ? [] : [`node ${JSON.stringify(node.name)}.type ${JSON.stringify(node.type)} is no trigger here, so no request would start this workflow: node types are case-sensitive and unprefixed (did you mean ${JSON.stringify(meant)}?)`];
    }),
  };
}

/**
 * The trigger type a node type was surely meant to be: the same once case, spaces and n8n's package prefix
 * (`n8n-nodes-base.webhook`, as n8n exports it) are set aside. Any other type is a node that triggers nothing.
 */
function nearMiss(type: string, byType: ReadonlyMap<string, TriggerPlugin>): string | null {
  const bare = type.trim().replace(/^n8n-nodes-base\./i, '').toLowerCase();
  for (const known of byType.keys()) if (known.toLowerCase() === bare) return known;
  return null;
}
