import { isDeepStrictEqual } from 'node:util';

/**
 * Registry port: workflows, credentials, trigger sample data and the request journal (journal.ts).
 * Adapters: Cosmos DB and JSON files under DATA_DIR. Documents are plain JSON; the registry does not
 * interpret them (validation lives in documents.ts, encryption of credential secrets in credential-crypto.ts).
 */

export interface Document {
  id: string;
}

export interface DocumentCollection<T extends Document> {
  get(id: string): Promise<T | null>;
  /** Insert or replace. */
  put(document: T): Promise<void>;
  /**
   * Store `document` only while the stored one is still `expected` (equal as JSON; null: none is stored), as one
   * step: a read-modify-write then loses no put or delete that came between its read and its write. False, and
   * nothing stored, when one did.
   */
  putIf(document: T, expected: T | null): Promise<boolean>;
  /** Every document, ordered by id. */
  list(): Promise<T[]>;
  /** True when something was deleted. */
  delete(id: string): Promise<boolean>;
  /** `delete` only while the stored document is still `expected`; false, and nothing deleted, otherwise. */
  deleteIf(expected: T): Promise<boolean>;
}

export interface Sample {
  executionId: string;
  receivedAt: number;
  /** The trigger output value as the workflow received it. */
  data: unknown;
}

export interface SampleStore {
  /**
   * Keep the newest `keep` samples of the node, newest first. Appending an executionId that is already
   * kept changes nothing, so a redelivered execution record does not show twice.
   */
  append(workflowId: string, node: string, sample: Sample, keep: number): Promise<void>;
  /** `append` of each sample in order, in one read and one write of the node's samples (a stage's batch). */
  appendMany(workflowId: string, node: string, samples: readonly Sample[], keep: number): Promise<void>;
  list(workflowId: string, node: string): Promise<Sample[]>;
}

/**
 * The node's samples after appending each of `added` in order, as `append` one at a time would leave them:
 * an executionId already kept is skipped, and each append keeps the newest `keep`. Null when nothing changes.
 */
export function withSamples(previous: readonly Sample[], added: readonly Sample[], keep: number): Sample[] | null {
  let samples = previous as Sample[];
  for (const sample of added) {
    if (samples.some((s) => s.executionId === sample.executionId)) continue;
    samples = [sample, ...samples].slice(0, Math.max(1, keep));
  }
  return samples === previous ? null : samples;
}

export interface Registry {
  readonly kind: 'cosmos' | 'file';
  readonly workflows: DocumentCollection<import('./documents').WorkflowDocument>;
  readonly credentials: DocumentCollection<import('./documents').StoredCredential>;
  readonly samples: SampleStore;
  /** What happened to each request, kept for the retention the adapter was opened with (journal.ts). */
  readonly journal: import('./journal').JournalStore;
  close(): Promise<void>;
}

export class RegistryError extends Error {
  constructor(message: string, readonly code: 'registry-unavailable' | 'invalid-document' | 'corrupt-document', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RegistryError';
  }
}

/** Whether two documents are the same as JSON (what `putIf` compares), whatever the order of their properties. */
export function sameDocument(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));
}

/** The id shape we accept for workflows and credentials: safe as a file name, a URL segment and a Cosmos id. */
export const DOCUMENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
