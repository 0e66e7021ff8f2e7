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
    validate: (workflow) => workflow.nodes.flatMap((node) => byType.get(node.type)?.validateNode?.(node) ?? []),
  };
}
