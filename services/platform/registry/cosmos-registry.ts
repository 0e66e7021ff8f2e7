import { readFileSync } from 'node:fs';
import * as https from 'node:https';
import * as tls from 'node:tls';
import { CosmosClient, type Container, type CosmosClientOptions } from '@azure/cosmos';
import { checkDocumentSize, DOCUMENT_ID, RegistryError, sameDocument, withSamples, type Document, type DocumentCollection, type Registry, type Sample } from './registry';
import type { StoredCredential, WorkflowDocument } from './documents';
import { firstLine, sanitizedCause } from '../logger/error-text';
import { openCosmosJournal } from './cosmos-journal';
import { COSMOS_CALL_DEADLINE_MS, readRetried, withinDeadline, type WithinDeadline } from './cosmos-calls';
import { sampleDocumentId } from './sample-ids';
import { DEFAULT_JOURNAL_RETENTION_DAYS, type JournalStore } from './journal';

export interface CosmosRegistryOptions {
  /** The account URL, e.g. https://myaccount.documents.azure.com:443/ (http:// only for a local test server). */
  endpoint: string;
  /** The account key. It never appears in an error message. */
  key: string;
  database: string;
  /** A PEM file of a CA to trust (on top of the usual roots), for a server with a self-signed certificate. */
  caFile?: string | null;
  /**
   * Per-request timeout, default 10 s. (@azure/cosmos 4.5.1 left this timer running after a request failed at
   * the network level; 4.10.1, the version installed, clears it.) A call as a whole is bounded by callDeadlineMs.
   */
  requestTimeoutMs?: number;
  /** The most one registry call may take, retries and throttling waits included: COSMOS_CALL_DEADLINE_MS (tests pass less). */
  callDeadlineMs?: number;
  /** Days the request journal keeps an entry (JOURNAL_RETENTION_DAYS): the entries' Cosmos TTL. */
  journalRetentionDays?: number;
}

/** System properties Cosmos adds to every item; stripped on read so documents round-trip exactly. */
const SYSTEM_PROPERTIES = ['_rid', '_self', '_etag', '_attachments', '_ts'] as const;
/** Cosmos ids are at most 255 characters and cannot contain / \ ? # . */
const MAX_COSMOS_ID = 255;
/** Concurrent appends to one node's samples retry on an etag conflict this many times. */
const MAX_APPEND_ATTEMPTS = 20;

interface SamplesDocument {
  id: string;
  workflowId: string;
  node: string;
  samples: Sample[];
}

/**
 * The Registry on Cosmos DB (SQL API): one database, containers `workflows`, `credentials` and
 * `samples`, each partitioned by `/id` (every read and write addresses one document by id, so each
 * is a point operation), and `journal` (cosmos-journal.ts). Documents are stored as given.
 *
 * Client configuration, and why:
 * - connectionPolicy.enableEndpointDiscovery = false: the client talks to the configured endpoint only.
 *   With discovery on, the SDK replaces it with the locations the account advertises; a local server
 *   (cosmosdb-server) always advertises `https://<host>:<port>/`, which breaks an http:// endpoint
 *   (TLS spoken to a plain-HTTP port) and can swap 127.0.0.1 for `localhost` (a host name the test
 *   certificate may not cover). For a single-region account nothing is lost; a multi-region account
 *   is reached through its global endpoint, which routes to the write region.
 * - enableBackgroundEndpointRefreshing = false: with discovery off there is nothing to refresh, and no
 *   timer keeps the process alive.
 * - caFile: trusted through `agent: new https.Agent({ ca })` for this client only (plus the usual
 *   roots); TLS verification is never turned off, here or process-wide.
 */
export async function openCosmosRegistry(options: CosmosRegistryOptions): Promise<Registry> {
  const redact = (text: string) => (options.key ? text.split(options.key).join('[redacted]') : text);
  // A write answered 400 or 413 says the document itself is wrong (too large for an item, say), which no retry
  // mends: not an outage, which the stages would wait out (platform/log/dead-lettering.ts).
  const unavailable: Unavailable = (what, error, write = false) => {
    const status = statusOf(error);
    return new RegistryError(redact(`cosmos registry could not ${what}: ${describeError(error)}`), write && (status === 400 || status === 413) ? 'invalid-document' : 'registry-unavailable', { cause: sanitizedCause(error, redact, ['code', 'substatus']) });
  };

  let url: URL;
  try { url = new URL(options.endpoint); } catch {
    throw new RegistryError(`cosmos endpoint ${JSON.stringify(redact(options.endpoint).slice(0, 200))} is not a URL`, 'registry-unavailable');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new RegistryError(`cosmos endpoint must be an https:// (or, for a local test server, http://) URL, not ${url.protocol}`, 'registry-unavailable');

  let agent: https.Agent | undefined;
  if (options.caFile) {
    if (url.protocol !== 'https:') throw new RegistryError(`a cosmos CA file (${options.caFile}) was given but the endpoint ${url.origin} is not https: drop one or the other`, 'registry-unavailable');
    let ca: string;
    try { ca = readFileSync(options.caFile, 'utf8'); } catch (error) {
      throw new RegistryError(`cosmos CA file ${options.caFile} cannot be read: ${(error as Error).message}`, 'registry-unavailable', { cause: error });
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----')) throw new RegistryError(`cosmos CA file ${options.caFile} holds no PEM certificate`, 'registry-unavailable');
    agent = new https.Agent({ keepAlive: true, ca: [...tls.rootCertificates, ca] });
  }

  const clientOptions: CosmosClientOptions = {
    endpoint: options.endpoint,
    key: options.key,
    ...(agent ? { agent } : {}),
    connectionPolicy: {
      enableEndpointDiscovery: false,
      enableBackgroundEndpointRefreshing: false,
      requestTimeout: options.requestTimeoutMs ?? 10_000,
      // Throttling (429) retries. The SDK checks its wait bound before adding the next wait, so one long
      // x-ms-retry-after-ms is waited in full: each call's deadline (cosmos-calls.ts) is what bounds it.
      retryOptions: { maxRetryAttemptCount: 5, maxWaitTimeInSeconds: 10 },
    },
  };

  let client: CosmosClient;
  try { client = new CosmosClient(clientOptions); } catch (error) {
    agent?.destroy();
    throw unavailable(`connect to ${url.origin}`, error);
  }
  const close = async () => { client.dispose(); agent?.destroy(); };

  const within = withinDeadline(options.callDeadlineMs ?? COSMOS_CALL_DEADLINE_MS);
  let containers: Record<'workflows' | 'credentials' | 'samples', Container>;
  let journal: JournalStore;
  try {
    const { database } = await client.databases.createIfNotExists({ id: options.database });
    const open = async (id: string) => {
      const { container, resource } = await database.containers.createIfNotExists({ id, partitionKey: { paths: ['/id'] } });
      const paths = resource?.partitionKey?.paths;
      if (paths && (paths.length !== 1 || paths[0] !== '/id')) {
        throw new RegistryError(`cosmos container ${options.database}/${id} exists with partition key ${JSON.stringify(paths)}; this registry needs ["/id"]`, 'registry-unavailable');
      }
      return container;
    };
    containers = { workflows: await open('workflows'), credentials: await open('credentials'), samples: await open('samples') };
    journal = await openCosmosJournal(database, options.journalRetentionDays ?? DEFAULT_JOURNAL_RETENTION_DAYS, unavailable, within);
  } catch (error) {
    await close();
    if (error instanceof RegistryError) throw error;
    throw unavailable(`open database ${options.database} at ${url.origin}`, error);
  }

  const samples = containers.samples;
  const readSamples = async (id: string, abortSignal: AbortSignal): Promise<{ document: SamplesDocument; etag: string } | null> => {
    try {
      const { resource, etag } = await readRetried(() => samples.item(id, id).read<SamplesDocument & { _etag?: string }>({ abortSignal }), abortSignal, statusOf);
      return resource ? { document: resource, etag: etag ?? resource._etag ?? '' } : null;
    } catch (error) {
      if (statusOf(error) === 404) return null;
      throw unavailable(`read samples/${id}`, error);
    }
  };

  const appendMany = (workflowId: string, node: string, added: readonly Sample[], keep: number): Promise<void> => {
    const id = sampleId(workflowId, node);
    return within(`write samples/${id}`, (abortSignal) => appendWithin(id, workflowId, node, added, keep, abortSignal));
  };
  const appendWithin = async (id: string, workflowId: string, node: string, added: readonly Sample[], keep: number, abortSignal: AbortSignal): Promise<void> => {
    for (let attempt = 0; attempt < MAX_APPEND_ATTEMPTS; attempt++) {
      const current = await readSamples(id, abortSignal);
      const previous = current && current.document.workflowId === workflowId && current.document.node === node ? current.document.samples : [];
      const merged = withSamples(previous, added, keep);
      if (!merged) return;
      const next: SamplesDocument = { id, workflowId, node, samples: merged };
      try {
        // Optimistic concurrency: create when absent, otherwise replace only the version we read.
        if (current) await samples.item(id, id).replace(next, { accessCondition: { type: 'IfMatch', condition: current.etag }, abortSignal });
        else await samples.items.create(next, { abortSignal });
        return;
      } catch (error) {
        if (isConflict(error)) {
          // Someone else appended in between: read again, after a short jittered pause.
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * (attempt + 1)));
          continue;
        }
        throw unavailable(`write samples/${id}`, error, true);
      }
    }
    throw new RegistryError(`cosmos registry could not append a sample to samples/${id}: still conflicting after ${MAX_APPEND_ATTEMPTS} attempts`, 'registry-unavailable');
  };

  return {
    kind: 'cosmos',
    workflows: collection<WorkflowDocument>(containers.workflows, 'workflows', unavailable, within),
    credentials: collection<StoredCredential>(containers.credentials, 'credentials', unavailable, within),
    samples: {
      append(workflowId, node, sample, keep) {
        return appendMany(workflowId, node, [sample], keep);
      },
      appendMany,
      async list(workflowId, node) {
        const id = sampleId(workflowId, node);
        const current = (await within(`read samples/${id}`, (abortSignal) => readSamples(id, abortSignal)))?.document;
        return current && current.workflowId === workflowId && current.node === node ? current.samples : [];
      },
    },
    journal,
    close,
  };
}

type Unavailable = (what: string, error: unknown, write?: boolean) => RegistryError;

function collection<T extends Document>(container: Container, name: string, unavailable: Unavailable, within: WithinDeadline): DocumentCollection<T> {
  const checkId = (id: unknown): string => {
    if (typeof id !== 'string' || !DOCUMENT_ID.test(id)) throw new RegistryError(`invalid document id ${JSON.stringify(String(id).slice(0, 140))}`, 'invalid-document');
    return id;
  };
  return {
    async get(id) {
      checkId(id);
      return within(`read ${name}/${id}`, async (abortSignal) => {
        try {
          const { resource } = await readRetried(() => container.item(id, id).read<T>({ abortSignal }), abortSignal, statusOf);
          return resource ? stripSystemProperties(resource) : null;
        } catch (error) {
          if (statusOf(error) === 404) return null;
          throw unavailable(`read ${name}/${id}`, error);
        }
      });
    },
    async put(document) {
      checkId(document.id);
      checkDocumentSize(name, document);
      await within(`write ${name}/${document.id}`, async (abortSignal) => {
        try {
          // A copy: the SDK may add properties (an id) to the object it is given.
          await container.items.upsert({ ...document }, { abortSignal });
        } catch (error) {
          throw unavailable(`write ${name}/${document.id}`, error, true);
        }
      });
    },
    async putIf(document, expected) {
      checkId(document.id);
      checkDocumentSize(name, document);
      const id = document.id;
      return within(`write ${name}/${id}`, async (abortSignal) => {
        try {
          if (expected === null) {
            await container.items.create({ ...document }, { abortSignal });
            return true;
          }
          // The version we compare is the one we replace: the etag makes the replace fail if another write came after this read.
          const { resource, etag } = await readRetried(() => container.item(id, id).read<T & { _etag?: string }>({ abortSignal }), abortSignal, statusOf);
          if (!resource || !sameDocument(stripSystemProperties(resource), expected)) return false;
          await container.item(id, id).replace({ ...document }, { accessCondition: { type: 'IfMatch', condition: etag ?? resource._etag ?? '' }, abortSignal });
          return true;
        } catch (error) {
          if (isConflict(error)) return false;
          throw unavailable(`write ${name}/${id}`, error, true);
        }
      });
    },
    async deleteIf(expected) {
      checkId(expected.id);
      const id = expected.id;
      return within(`delete ${name}/${id}`, async (abortSignal) => {
        try {
          const { resource, etag } = await readRetried(() => container.item(id, id).read<T & { _etag?: string }>({ abortSignal }), abortSignal, statusOf);
          if (!resource || !sameDocument(stripSystemProperties(resource), expected)) return false;
          await container.item(id, id).delete({ accessCondition: { type: 'IfMatch', condition: etag ?? resource._etag ?? '' }, abortSignal });
          return true;
        } catch (error) {
          if (isConflict(error)) return false;
          throw unavailable(`delete ${name}/${id}`, error);
        }
      });
    },
    async list() {
      const resources = await within(`list ${name}`, async (abortSignal) => {
        try {
          return (await readRetried(() => container.items.readAll<T & { id: string }>({ abortSignal }).fetchAll(), abortSignal, statusOf)).resources;
        } catch (error) {
          throw unavailable(`list ${name}`, error);
        }
      });
      // Sorted here (UTF-16 code units, as the file registry does) rather than by ORDER BY, whose
      // collation is the server's business.
      return resources.map(stripSystemProperties).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    },
    async delete(id) {
      checkId(id);
      return within(`delete ${name}/${id}`, async (abortSignal) => {
        try {
          await container.item(id, id).delete({ abortSignal });
          return true;
        } catch (error) {
          if (statusOf(error) === 404) return false;
          throw unavailable(`delete ${name}/${id}`, error);
        }
      });
    },
  };
}

/** One samples document per (workflow, node), named as sample-ids.ts says within a Cosmos id's 255 characters. */
export const sampleId = (workflowId: string, node: string): string => sampleDocumentId(workflowId, node, MAX_COSMOS_ID);

function stripSystemProperties<T>(resource: T): T {
  const copy = { ...resource } as Record<string, unknown>;
  for (const property of SYSTEM_PROPERTIES) delete copy[property];
  return copy as T;
}

/** Another write came first: the document exists (409), changed (412) or is gone (404). */
function isConflict(error: unknown): boolean {
  const status = statusOf(error);
  return status === 409 || status === 412 || status === 404;
}

/** The HTTP status of a Cosmos error (ErrorResponse.code is the status for HTTP failures). */
function statusOf(error: unknown): number | undefined {
  const e = (error ?? {}) as { code?: unknown; statusCode?: unknown };
  if (typeof e.code === 'number') return e.code;
  if (typeof e.statusCode === 'number') return e.statusCode;
  return undefined;
}


function describeError(error: unknown): string {
  const e = (error ?? {}) as { code?: unknown; substatus?: unknown };
  const parts: string[] = [];
  if (typeof e.code === 'number') parts.push(`HTTP ${e.code}${typeof e.substatus === 'number' ? `/${e.substatus}` : ''}`);
  else if (typeof e.code === 'string' && e.code) parts.push(e.code);
  parts.push(firstLine(error) || 'no detail');
  return parts.join(' ');
}

