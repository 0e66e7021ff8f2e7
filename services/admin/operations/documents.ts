import type { CertificateFact } from '../../platform/registry/certificate-facts';
import { credentialCertificates, holdsCertificates, retiredCertificates } from '../../platform/registry/certificate-facts';
import { X509Certificate } from 'node:crypto';
import type { CredentialSealer } from '../../platform/registry/credential-crypto';
import { currentReceiverKeys, keepRemovedAsRetired } from '../../platform/registry/as2-retired-keys';
import type { As2CredentialData } from '../../platform/registry/as2-credential';
import { credentialPutProblems, DocumentError, parseCredentialDocument, parseWorkflowDocument, type CredentialDocument, type StoredCredential, type WorkflowDocument } from '../../platform/registry/documents';
import { RegistryError, type Registry } from '../../platform/registry/registry';
import type { TriggerCatalog } from '../../triggers/catalog';
import { as2CertificateProblems } from '../../triggers/as2/certificates';

/**
 * What `ingress workflows|credentials` and the management API share about documents: one validation of a
 * workflow (its shape, then each trigger node's own checks), the hook URL, and a credential's public face.
 */

/** A workflow document as `workflows put` accepts it, or a DocumentError listing every problem. */
export function checkWorkflowDocument(input: unknown, catalog: Pick<TriggerCatalog, 'validate'>): WorkflowDocument {
  const doc = parseWorkflowDocument(input);
  const problems = catalog.validate(doc);
  if (problems.length) throw new DocumentError(problems);
  return doc;
}

/**
 * A credential document as `credentials put` accepts it at time `at`: its shape, then what would make it useless
 * from the start. What depends on the stored credential (an AS2 certificate's key identifier) putCredential checks.
 */
export function checkCredentialDocument(input: unknown, at: number): CredentialDocument {
  const doc = parseCredentialDocument(input);
  const problems = credentialPutProblems(doc, at);
  if (problems.length) throw new DocumentError(problems);
  return doc;
}

/**
 * What an AS2 credential put refuses in its certificates (as2CertificateProblems: what CMS reads of them is the AS2
 * trigger's to judge, not the registry's), given `before`: a receiver certificate it already held, current or
 * retired, is not new in this put and is not refused again. `before` that cannot be opened exempts nothing.
 */
export function as2PutProblems(doc: CredentialDocument, before: StoredCredential | null, sealer: CredentialSealer): string[] {
  if (doc.type !== 'as2ReceiverAuth') return [];
  const stored = new Set<string>();
  if (before?.type === 'as2ReceiverAuth') {
    let data: As2CredentialData | null = null;
    try { data = sealer.open(before).data as As2CredentialData; } catch { /* credentialToStore says so, unless --forget-retired */ }
    for (const pair of data ? [...currentReceiverKeys(data), ...(data.retiredReceiverKeys ?? [])] : []) {
      try { stored.add(new X509Certificate(pair.certificate).fingerprint256); } catch { /* unreadable: matches nothing */ }
    }
  }
  return as2CertificateProblems(doc.data as As2CredentialData, stored);
}

/**
 * The credential a put stores over `before` (the stored one, or null): an AS2 credential keeps the receiver key
 * pairs and partner certificates the put removes, retired, so that records accepted with them still open in the
 * decoder and on replay (platform/registry/as2-retired-keys.ts); `forgetRetired` drops them. A `problem` when
 * the stored credential cannot be opened to keep them: replacing it would lose them silently.
 */
export function credentialToStore(doc: CredentialDocument, before: StoredCredential | null, sealer: CredentialSealer, forgetRetired: boolean, at: number): { doc: CredentialDocument } | { problem: string } {
  if (forgetRetired || doc.type !== 'as2ReceiverAuth' || before?.type !== 'as2ReceiverAuth') return { doc };
  let stored: CredentialDocument;
  try { stored = sealer.open(before); } catch {
    return { problem: `Credential ${doc.id} as stored cannot be opened with this INGRESS_ENCRYPTION_KEY, so the AS2 keys it holds cannot be kept for the records still to be decoded or replayed; put it with --forget-retired (API: ?forgetRetired=true) to replace it and drop them` };
  }
  return { doc: { ...doc, data: keepRemovedAsRetired(stored.data as As2CredentialData, doc.data as As2CredentialData, new Date(at)) } };
}

/** What a credential put came to: stored (over an earlier one or not), a conflict that refused it, or problems of the document given what is stored (as2PutProblems). */
export type CredentialPut = { stored: StoredCredential; existed: boolean } | { conflict: string } | { problems: string[] };

/** How many times a put reads, merges and writes again when another write came between its read and its write. */
const PUT_ATTEMPTS = 5;

/**
 * Store a checked credential as `credentials put` does, through the CLI or the API: refused while workflows name
 * it under another type (retypeProblem); an AS2 certificate of ours new in this put is checked (as2PutProblems);
 * an AS2 credential keeps what the put removes (credentialToStore). The
 * read, the merge and the write are one compare-and-set (`putIf`), done again when another write came between,
 * so that two puts of one credential at once each keep what the other retired. `precondition` may refuse the
 * stored version each time (the API's If-Match) by throwing.
 */
export async function putCredential(registry: Registry, doc: CredentialDocument, sealer: CredentialSealer, forgetRetired: boolean, at: number, precondition: (before: StoredCredential | null) => void = () => {}): Promise<CredentialPut> {
  for (let attempt = 0; attempt < PUT_ATTEMPTS; attempt++) {
    const before = await registry.credentials.get(doc.id);
    precondition(before);
    const retyped = before && retypeProblem(await registry.workflows.list(), doc.id, before.type, doc.type);
    if (retyped) return { conflict: retyped };
    const problems = as2PutProblems(doc, before, sealer);
    if (problems.length) return { problems };
    const kept = credentialToStore(doc, before, sealer, forgetRetired, at);
    if ('problem' in kept) return { conflict: kept.problem };
    const stored = sealer.seal(kept.doc);
    let written: boolean;
    try { written = await registry.credentials.putIf(stored, before); } catch (error) {
      // What an AS2 credential grows by: every put keeps the keys and certificates it removes (as2-retired-keys.ts).
      if (error instanceof RegistryError && error.code === 'invalid-document' && doc.type === 'as2ReceiverAuth' && before?.type === 'as2ReceiverAuth' && !forgetRetired) {
        throw new RegistryError(`${error.message}; it keeps the receiver keys and partner certificates earlier puts removed: put it with --forget-retired (API: ?forgetRetired=true) to drop them`, 'invalid-document', { cause: error });
      }
      throw error;
    }
    if (written) return { stored, existed: before !== null };
  }
  return { conflict: `Credential ${doc.id} was changed by another write during each of ${PUT_ATTEMPTS} attempts to store it; try again` };
}

/** What `credentials reseal` did: ids sealed again under the key, how many were under it already, ids neither key opens. */
export interface ResealOutcome {
  resealed: string[];
  current: number;
  unreadable: string[];
}

/**
 * Seal again under INGRESS_ENCRYPTION_KEY every credential that only INGRESS_ENCRYPTION_KEY_PREVIOUS opens (the
 * key's rotation, docs/security.md). The data is not changed. A credential put while this runs is not
 * overwritten: each is written only over what was read (`putIf`), and skipped if it changed (a put seals with
 * the key anyway).
 */
export async function resealCredentials(registry: Registry, sealer: CredentialSealer): Promise<ResealOutcome> {
  const outcome: ResealOutcome = { resealed: [], current: 0, unreadable: [] };
  for (const stored of await registry.credentials.list()) {
    let previous: boolean;
    try { previous = sealer.sealedWithPrevious(stored); } catch { outcome.unreadable.push(stored.id); continue; }
    if (!previous) { outcome.current++; continue; }
    if (await registry.credentials.putIf(sealer.seal(sealer.open(stored)), stored)) outcome.resealed.push(stored.id);
  }
  return outcome;
}

/** Null when no base is known (config.ts hookBaseUrl: PORT=0 and no receiver listening in this process). */
export function hookUrl(baseUrl: string | null, workflowId: string): string | null {
  return baseUrl === null ? null : `${baseUrl}/hook/${encodeURIComponent(workflowId)}`;
}

/** The trigger nodes of a workflow that a catalogue knows (their sample data, the console's view). */
export function triggerNodes(workflow: WorkflowDocument, catalog: Pick<TriggerCatalog, 'pluginFor'>): { name: string; type: string; disabled: boolean }[] {
  return workflow.nodes.filter((n) => catalog.pluginFor(n.type) !== null).map((n) => ({ name: n.name, type: n.type, disabled: n.disabled === true }));
}

export interface CredentialMetadata {
  id: string;
  name: string | null;
  type: string;
  updatedAt: string;
  certificates?: CertificateFact[] | null;
  /** AS2: what earlier puts removed, kept to open records accepted with it (omitted when none). */
  retiredCertificates?: (CertificateFact & { retiredAt: unknown })[];
  certificatesError?: string;
}

/**
 * Id, type, and for credentials holding certificates each certificate's public facts (certificate-facts.ts):
 * secrets and private keys never leave the registry this way. `sealer` null: the key is not configured.
 */
export function credentialMetadata(stored: StoredCredential, sealer: CredentialSealer | null, now: number): CredentialMetadata {
  const line: CredentialMetadata = { id: stored.id, name: stored.name ?? null, type: stored.type, updatedAt: stored.updatedAt };
  if (holdsCertificates(stored.type)) {
    if (!sealer) line.certificatesError = 'INGRESS_ENCRYPTION_KEY is not set, so the certificates cannot be read';
    else {
      try {
        const opened = sealer.open(stored);
        line.certificates = credentialCertificates(opened, now);
        const retired = retiredCertificates(opened, now);
        if (retired.length) line.retiredCertificates = retired;
      } catch (error) { line.certificatesError = (error as Error).message; }
    }
  }
  return line;
}

/** Workflows whose nodes name this credential, so that deleting it would break them. */
export function workflowsUsingCredential(workflows: WorkflowDocument[], credentialId: string): string[] {
  return workflows.filter((w) => w.nodes.some((n) => n.credentials && Object.values(n.credentials).includes(credentialId))).map((w) => w.id);
}

/**
 * The problem with storing credential `id` as `type` over a stored one of another type, while workflows name
 * it in a slot of the old type (a node's `credentials` are keyed by type): each of their requests would then
 * fail with credential-unavailable, as after a delete, which is refused the same way. Null when none does.
 */
export function retypeProblem(workflows: WorkflowDocument[], id: string, storedType: string | null, type: string): string | null {
  if (storedType === null || storedType === type) return null;
  const users = workflows.filter((w) => w.nodes.some((n) => n.credentials && Object.entries(n.credentials).some(([slot, ref]) => ref === id && slot !== type))).map((w) => w.id);
  return users.length ? `Credential ${id} is a ${storedType} credential used by workflow(s) ${users.join(', ')}; it cannot become ${type} until they no longer use it` : null;
}
