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
   * Keep the newest `keep` samples of the node (by `receivedAt`), newest first. Appending an executionId that
   * is already kept changes nothing, so a redelivered execution record does not show twice; one older than
   * every sample of a full window (a replay) is not kept.
   */
  append(workflowId: string, node: string, sample: Sample, keep: number): Promise<void>;
  /** `append` of each sample in order, in one read and one write of the node's samples (a stage's batch). */
  appendMany(workflowId: string, node: string, samples: readonly Sample[], keep: number): Promise<void>;
  list(workflowId: string, node: string): Promise<Sample[]>;
}

/**
 * The most a node's samples may take as JSON, in UTF-8 bytes. They share one registry document, and Cosmos DB
 * refuses a document over 2 MB (as UTF-8 JSON): a refused write failed the sampler's batch over and over, and
 * then dead-lettered a record. `keep` samples of up to SAMPLE_MAX_BYTES each can pass that, so the oldest give
 * way; what is left (half a megabyte) is for the document's other properties.
 */
export const SAMPLES_MAX_BYTES = 1.5 * 1024 * 1024;

const sizes = new WeakMap<Sample, number>();
/** A sample's JSON size, remembered: a writer that holds its samples (file-samples.ts) measures each once. */
function bytesOf(sample: Sample): number {
  let size = sizes.get(sample);
  if (size === undefined) sizes.set(sample, (size = Buffer.byteLength(JSON.stringify(sample))));
  return size;
}

/**
 * The node's samples after appending each of `added` in order, as `append` one at a time would leave them:
 * an executionId already kept is skipped, each append keeps the newest `keep` by `receivedAt` (the later
 * appended first among equal times), and no more of the newest than fit in SAMPLES_MAX_BYTES (the newest
 * always). Null when nothing changes.
 *
 * By time, not by arrival: a replay of an old range (or another partition running behind) brings executions
 * whose ids left the window long ago, and put first they showed week-old data as the latest.
 */
export function withSamples(previous: readonly Sample[], added: readonly Sample[], keep: number): Sample[] | null {
  const most = Math.max(1, keep);
  let samples = previous as Sample[];
  for (const sample of added) {
    if (samples.some((s) => s.executionId === sample.executionId)) continue;
    const newer = samples.findIndex((s) => s.receivedAt <= sample.receivedAt);
    const at = newer < 0 ? samples.length : newer;
    // Older than all of a full window: it would fall out at once.
    if (at >= most) continue;
    samples = [...samples.slice(0, at), sample, ...samples.slice(at)].slice(0, most);
  }
  if (samples === previous) return null;
  // As JSON: '[', then each sample followed by ',' or ']'.
  let bytes = 1;
  let fit = 0;
  while (fit < samples.length && (fit === 0 || bytes + bytesOf(samples[fit]) + 1 <= SAMPLES_MAX_BYTES)) bytes += bytesOf(samples[fit++]) + 1;
  return fit < samples.length ? samples.slice(0, fit) : samples;
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

/**
 * The most a workflow or credential document may take, as compact UTF-8 JSON: Cosmos DB's item limit (2 MB, which
 * it counts as 2 MiB). Checked before a write by both adapters, so the embedded default refuses what Cosmos would
 * (almost: Cosmos adds its own system properties, about 200 bytes, so a document in those last bytes is accepted by
 * the file registry and refused by Cosmos's 413, which is `invalid-document` too),
 * and a document over it is refused as wrong (`invalid-document`), not as an outage to wait out: cosmosdb-server
 * stores more, and Cosmos's own 413 would come only after the write.
 */
export const MAX_DOCUMENT_BYTES = 2 * 1024 * 1024;

/** `invalid-document` naming the size and the limit when `document` is over MAX_DOCUMENT_BYTES. */
export function checkDocumentSize(collection: string, document: Document): void {
  const bytes = Buffer.byteLength(JSON.stringify(document));
  if (bytes > MAX_DOCUMENT_BYTES) {
    throw new RegistryError(`${collection}/${document.id} would take ${bytes} bytes as JSON, over the ${MAX_DOCUMENT_BYTES} bytes (2 MiB, Cosmos DB's item limit) a registry document may take`, 'invalid-document');
  }
}

/** The id shape we accept for workflows and credentials: safe as a file name, a URL segment and a Cosmos id. */
export const DOCUMENT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
