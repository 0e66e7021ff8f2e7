import { createHash } from 'node:crypto';
import { DOCUMENT_ID, RegistryError } from './registry';

/**
 * The name of the one samples document per (workflow, node), in Cosmos and on files alike:
 * `${workflowId}.${base64url(node)}`; base64url keeps any node name clear of the characters a Cosmos id or a
 * file name cannot hold. A node name too long for the backend's limit (a Cosmos id's 255 characters, a file
 * name's 255 bytes with its extension) is named by its SHA-256 instead, after `.~` (a character neither
 * base64url nor a workflow id uses, so the two forms never meet); the document also records the workflow id
 * and node, which reads check.
 */
export function sampleDocumentId(workflowId: string, node: string, maxLength: number): string {
  if (!DOCUMENT_ID.test(workflowId)) throw new RegistryError(`invalid workflow id ${JSON.stringify(workflowId.slice(0, 140))}`, 'invalid-document');
  const plain = `${workflowId}.${Buffer.from(node, 'utf8').toString('base64url')}`;
  if (plain.length <= maxLength) return plain;
  return `${workflowId}.~${createHash('sha256').update(node, 'utf8').digest('base64url')}`;
}
