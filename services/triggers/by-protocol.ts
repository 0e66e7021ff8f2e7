import type { WorkflowNode } from '../platform/registry/documents';
import type { TriggerPlugin } from './trigger';

/**
 * One node type served by several plugins, chosen per node (the webhook node's Protocol: HTTP or AS2).
 * The stage loops see a single plugin and stay free of protocol branches.
 */
export function byProtocol(nodeType: string, pick: (node: WorkflowNode) => TriggerPlugin): TriggerPlugin {
  return {
    nodeTypes: [nodeType],
    kindOf: (node) => pick(node).kindOf(node),
    admit: (request, node, services) => pick(node).admit(request, node, services),
    validator: (request, node) => pick(node).validator?.(request, node) ?? null,
    inspect: (request, node, body, services) => pick(node).inspect(request, node, body, services),
    accepted: (request, node, body, inspection, services) => pick(node).accepted(request, node, body, inspection, services),
    notAccepted: async (request, node, inspection, services) => (await pick(node).notAccepted?.(request, node, inspection, services)) ?? null,
    idempotency: (node) => pick(node).idempotency?.(node) ?? null,
    validateNode: (node) => pick(node).validateNode?.(node) ?? [],
    decode: (received, node, services) => pick(node).decode(received, node, services),
  };
}
