import { createHash, randomUUID } from 'node:crypto';
import { pipeline, Readable } from 'node:stream';
import { BlobServiceClient, type BlobHTTPHeaders, type BlockBlobClient, type ContainerClient } from '@azure/storage-blob';
import { assertObjectPath, createMeter, MAX_VERSIONED_BYTES, ObjectStoreError, type ObjectStore, type PutOptions, type StoredObject } from './object-store';
import { firstLine, sanitizedCause } from '../logger/error-text';
import { ConfigError } from '../config/config';
import { watchedBody } from './watched-body';

export interface AzureBlobStoreOptions {
  /** An Azure Storage connection string. It holds the account key: it never appears in an error. */
  connectionString: string;
  container: string;
  /**
   * How long one call may wait for the service's answer (its headers; retries included) before it fails as
   * store-unavailable; and how long a download's reader, once it asks for more, waits for the next bytes.
   */
  answerTimeoutMs?: number;
}

/**
 * The SDK has no client-side time-out of its own (retryOptions.tryTimeoutInMs only asks the *server* to give up,
 * as a URL parameter), so an endpoint that takes connections and never answers (or stops sending a body) would
 * hold a call for ever. 30 s
 * is ample for a 4 MiB block over a slow link.
 */
const ANSWER_TIMEOUT_MS = 30_000;

/** Size of one staged block: at most MAX_IN_FLIGHT of these are uploading, plus one filling. */
const BLOCK_BYTES = 4 * 1024 * 1024;
const MAX_IN_FLIGHT = 4;

/** Metadata keys (Azure metadata names must be C# identifiers; the service lower-cases them). */
const META_SHA256 = 'sha256';
/** Set when put() got no contentType: Azure then reports application/octet-stream, the port reports null. */
const META_UNTYPED = 'untyped';

/**
 * The ObjectStore on Azure Blob Storage (block blobs). put() streams the body through a meter
 * (byte count, SHA-256, maxBytes) and stages it as 4 MiB blocks, at most four in flight; the blob
 * appears only when the block list is committed, and that happens only once the whole body has
 * arrived, fitted within maxBytes and every block is staged. A body that errors or is too large
 * therefore leaves nothing behind (the staged, uncommitted blocks are discarded by the service) and
 * an existing object at the same path is left untouched. A body that fits in one block is sent with
 * a single Put Blob, which is atomic as well.
 *
 * The SHA-256 is stored as blob metadata `sha256`; it is only known once the body has ended, which is
 * why this adapter stages and commits blocks itself instead of calling BlockBlobClient.uploadStream
 * (whose commit options are fixed when the upload starts).
 */
export async function openAzureBlobStore(options: AzureBlobStoreOptions): Promise<ObjectStore> {
  const redact = redactorFor(options.connectionString);
  const fail = (what: string, error: unknown, code: 'not-found' | 'store-unavailable' = 'store-unavailable', hint = '') =>
    new ObjectStoreError(redact(`azure blob store could not ${what}: ${describeError(error)}${hint}`), code, { cause: sanitizedCause(error, redact, ['statusCode', 'code']) });

  if (!/^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/.test(options.container)) {
    throw new ObjectStoreError(`azure blob container name ${JSON.stringify(options.container.slice(0, 80))} is invalid: 3-63 lower-case letters, digits and single hyphens`, 'store-unavailable');
  }

  const answerTimeoutMs = options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS;
  let container: ContainerClient;
  let answered: Bound;
  let endpoint: string;
  try {
    const service = BlobServiceClient.fromConnectionString(options.connectionString, {
      // Fail within seconds when the account is unreachable, rather than the SDK's minutes.
      retryOptions: { maxTries: 4, retryDelayInMs: 500, maxRetryDelayInMs: 4000 },
    });
    container = service.getContainerClient(options.container);
    endpoint = endpointOf(service.url);
    answered = boundedBy(answerTimeoutMs, endpoint);
  } catch (error) {
    // The value of a variable, so the exit is a configuration error's (78), as for a value refused at load: the
    // config's check (a key the SDK needs is there) cannot tell every string the SDK refuses. Never echo the
    // connection string itself: it holds the account key.
    throw new ConfigError([redact(`AZURE_STORAGE_CONNECTION_STRING: the Azure SDK did not accept it (${firstLine(error)})`)]);
  }

  try {
    await answered((abortSignal) => container.createIfNotExists({ abortSignal }));
  } catch (error) {
    if (statusOf(error) !== 403) throw fail(`open container ${options.container}`, error);
    // Creating a container needs the account's authority; a SAS scoped to a container made beforehand (least
    // privilege) cannot, and needs not. Listing is an operation the store needs anyway and such a SAS allows.
    try {
      await answered((abortSignal) => container.listBlobsFlat({ abortSignal }).byPage({ maxPageSize: 1 }).next());
    } catch (probeError) {
      throw fail(`open container ${options.container}`, probeError, 'store-unavailable', containerProblem(options.container, probeError));
    }
  }

  const blobOf = (p: string): BlockBlobClient => container.getBlockBlobClient(p);

  /**
   * A download's body, bounded like its headers: once the service has answered, the body could stall (nothing more
   * sent, the connection still open) or break off (a reset the SDK reports as a bare AbortError; its
   * maxRetryRequests covers only a body that ends short). Both are the store not answering, store-unavailable, so
   * a stage waits the outage out rather than dead-lettering the record, and the decoder's partition never hangs.
   */
  const bodyOf = (p: string, body: Readable): Readable => watchedBody(body, {
    idleMs: answerTimeoutMs,
    stalled: (bytes) => new ObjectStoreError(`azure blob store could not read ${p}: no more of the body from ${endpoint} within ${answerTimeoutMs} ms (after ${bytes} bytes)`, 'store-unavailable'),
    brokeOff: (error, bytes) => new ObjectStoreError(redact(`azure blob store could not read ${p}: the body broke off after ${bytes} bytes`), 'store-unavailable', { cause: sanitizedCause(error, redact, ['statusCode', 'code']) }),
  });

  async function upload(blob: BlockBlobClient, p: string, source: Readable, putOptions: PutOptions): Promise<StoredObject> {
    const { maxBytes, contentType, ifAbsent } = putOptions;
    // Create only: the service refuses the write (409/412) when a blob is already there.
    const conditions = ifAbsent ? { ifNoneMatch: '*' } : undefined;
    const metered = createMeter(maxBytes);
    const meter = metered.stream;
    // Errors of the body reach the meter (and so the loop below); a meter that stops destroys the body.
    pipeline(source, meter, () => undefined);

    const abort = new AbortController();
    const uploadId = randomUUID();
    const blockIds: string[] = [];
    const inflight = new Set<Promise<void>>();
    let stageError: unknown = null;

    const stage = async (data: Buffer) => {
      while (inflight.size >= MAX_IN_FLIGHT) await Promise.race(inflight);
      if (stageError) throw stageError;
      // Block ids of one blob must all have the same length: uuid + fixed-width counter.
      const id = Buffer.from(`${uploadId}-${String(blockIds.length).padStart(6, '0')}`).toString('base64');
      blockIds.push(id);
      const task: Promise<void> = answered((abortSignal) => blob.stageBlock(id, data, data.length, { abortSignal }), abort.signal).then(
        () => { inflight.delete(task); },
        (error: unknown) => { inflight.delete(task); stageError ??= error; abort.abort(); },
      );
      inflight.add(task);
    };

    let pending: Buffer[] = [];
    let pendingLength = 0;
    try {
      for await (const chunk of meter as AsyncIterable<Buffer>) {
        pending.push(chunk);
        pendingLength += chunk.length;
        while (pendingLength >= BLOCK_BYTES) {
          const all = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingLength);
          await stage(all.subarray(0, BLOCK_BYTES));
          const rest = all.subarray(BLOCK_BYTES);
          pending = rest.length > 0 ? [rest] : [];
          pendingLength = rest.length;
        }
      }
      // The body ended within maxBytes: only now may the object become visible.
      const sha256 = metered.sha256();
      const headers: BlobHTTPHeaders = { blobContentType: contentType ?? 'application/octet-stream' };
      const metadata: Record<string, string> = { [META_SHA256]: sha256, ...(contentType === undefined ? { [META_UNTYPED]: 'true' } : {}) };
      const rest = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingLength);
      if (blockIds.length === 0) {
        await answered((abortSignal) => blob.upload(rest, rest.length, { blobHTTPHeaders: headers, metadata, conditions, abortSignal }), abort.signal);
      } else {
        if (rest.length > 0) await stage(rest);
        while (inflight.size > 0) await Promise.race(inflight);
        if (stageError) throw stageError;
        await answered((abortSignal) => blob.commitBlockList(blockIds, { blobHTTPHeaders: headers, metadata, conditions, abortSignal }), abort.signal);
      }
      return { path: p, size: metered.size(), sha256, contentType: contentType ?? null };
    } catch (error) {
      abort.abort();
      meter.destroy();
      await Promise.allSettled([...inflight]);
      if (error instanceof ObjectStoreError) throw error;
      const status = statusOf(stageError ?? error);
      if (ifAbsent && (status === 409 || status === 412)) throw new ObjectStoreError(`an object is already at ${p}`, 'already-exists');
      if (stageError === null && !isAzureError(error)) {
        // The body itself failed (the client went away). Reported like the filesystem adapter does;
        // the original error is the cause (it came from the caller's stream, not from the SDK).
        throw new ObjectStoreError(`azure blob store could not write ${p}: the body failed: ${firstLine(error)}`, 'store-unavailable', { cause: error });
      }
      throw fail(`write ${p}`, stageError ?? error);
    }
  }

  return {
    kind: 'azure-blob',

    async put(p: string, body: Readable | Buffer, putOptions: PutOptions = {}): Promise<StoredObject> {
      assertObjectPath(p);
      const source = Buffer.isBuffer(body) ? Readable.from([body]) : body;
      return upload(blobOf(p), p, source, putOptions);
    },

    async get(p) {
      assertObjectPath(p);
      try {
        // Bounded until the answer starts; the body then streams for as long as the reader takes, each wait for more bounded.
        const response = await answered((abortSignal) => blobOf(p).download(0, undefined, { maxRetryRequests: 3, abortSignal }));
        return bodyOf(p, (response.readableStreamBody as Readable | undefined) ?? Readable.from([]));
      } catch (error) {
        if (isMissingBlob(error)) throw new ObjectStoreError(`no object at ${p}`, 'not-found');
        throw fail(`read ${p}`, error);
      }
    },

    async head(p) {
      assertObjectPath(p);
      try {
        const properties = await answered((abortSignal) => blobOf(p).getProperties({ abortSignal }));
        const metadata = properties.metadata ?? {};
        return {
          path: p,
          size: properties.contentLength ?? 0,
          // Blobs this adapter wrote always carry it; a foreign blob reports '' rather than a guess.
          sha256: metadata[META_SHA256] ?? '',
          contentType: metadata[META_UNTYPED] === 'true' ? null : properties.contentType ?? null,
        };
      } catch (error) {
        if (isMissingBlob(error)) return null;
        throw fail(`read the properties of ${p}`, error);
      }
    },

    async readVersioned(p) {
      assertObjectPath(p);
      try {
        const response = await answered((abortSignal) => blobOf(p).download(0, undefined, { maxRetryRequests: 3, abortSignal }));
        const raw = (response.readableStreamBody as Readable | undefined) ?? Readable.from([]);
        if ((response.contentLength ?? 0) > MAX_VERSIONED_BYTES) {
          raw.destroy();
          throw new ObjectStoreError(`the object at ${p} is ${response.contentLength} bytes, more than the ${MAX_VERSIONED_BYTES} a versioned read takes`, 'too-large');
        }
        const chunks: Buffer[] = [];
        for await (const chunk of bodyOf(p, raw)) chunks.push(chunk as Buffer);
        // The ETag of the answer that carried these bytes: what a swap's If-Match compares.
        return { content: Buffer.concat(chunks), version: response.etag ?? '' };
      } catch (error) {
        if (error instanceof ObjectStoreError) throw error;
        if (isMissingBlob(error)) throw new ObjectStoreError(`no object at ${p}`, 'not-found');
        throw fail(`read ${p}`, error);
      }
    },

    async swap(p, content, version, swapOptions = {}) {
      assertObjectPath(p);
      const { contentType } = swapOptions;
      const metadata: Record<string, string> = { [META_SHA256]: createHash('sha256').update(content).digest('hex'), ...(contentType === undefined ? { [META_UNTYPED]: 'true' } : {}) };
      try {
        // One Put Blob, decided by the service: If-Match the version read, or If-None-Match * for none.
        const response = await answered((abortSignal) => blobOf(p).upload(content, content.length, {
          blobHTTPHeaders: { blobContentType: contentType ?? 'application/octet-stream' }, metadata, abortSignal,
          conditions: version === null ? { ifNoneMatch: '*' } : { ifMatch: version },
        }));
        return response.etag ?? '';
      } catch (error) {
        const status = statusOf(error);
        // 412: another ETag; 409: a blob where none was expected; 404: none where one was.
        if (status === 412 || status === 409 || (status === 404 && version !== null)) {
          throw new ObjectStoreError(`the object at ${p} is no longer the one of version ${version}`, 'changed');
        }
        throw fail(`write ${p}`, error);
      }
    },

    async delete(p) {
      assertObjectPath(p);
      try {
        return (await answered((abortSignal) => blobOf(p).deleteIfExists({ abortSignal }))).succeeded;
      } catch (error) {
        throw fail(`delete ${p}`, error);
      }
    },

    async *list(prefix) {
      // One signal serves every page request of the listing; each wait for a page is bounded on its own.
      const pages = new RelayedAbort();
      const iterator = container.listBlobsFlat({ prefix, abortSignal: pages.signal })[Symbol.asyncIterator]();
      for (;;) {
        let next: IteratorResult<{ name: string }>;
        try { next = await answered(async (abortSignal) => pages.relay(abortSignal, () => iterator.next())); } catch (error) { throw fail(`list ${JSON.stringify(prefix)}`, error); }
        if (next.done) return;
        yield next.value.name;
      }
    },

    async close() { /* the SDK holds no connection that needs closing */ },
  };
}

/** Why a connection string that may not create the container cannot use it either; '' when the error says it all (a wrong key). */
function containerProblem(container: string, error: unknown): string {
  const status = statusOf(error);
  const code = (error as { code?: unknown } | null)?.code;
  if (status === 404) return ` (the container does not exist, and this connection string may not create it: create ${container} beforehand, or use the account key)`;
  if (status === 403 && code === 'AuthorizationPermissionMismatch') {
    return ` (this connection string may neither create nor list ${container}: a SAS needs the list permission (l), with read, add, create, write and delete: sp=racwdl)`;
  }
  return '';
}

/**
 * A 404 for the blob, not for its container: callers act on a missing object (no failure MDN kept, so the processed
 * one goes out; no delivery evidence, so the MDN is sent), and a container deleted or misnamed under a running
 * service is an outage. A HEAD's 404 has no body; the service names the error in `x-ms-error-code`, which the SDK
 * gives as `code` (and the response's header, for older versions).
 */
function isMissingBlob(error: unknown): boolean {
  if (statusOf(error) !== 404) return false;
  const failed = error as { code?: unknown; response?: { headers?: { get?(name: string): string | undefined } } } | null;
  const code = typeof failed?.code === 'string' ? failed.code : failed?.response?.headers?.get?.('x-ms-error-code');
  return code !== 'ContainerNotFound';
}

function statusOf(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** Errors raised by the SDK (RestError, an abort of ours, no answer in time) rather than by the body stream. */
function isAzureError(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return name === 'RestError' || name === 'AbortError' || error instanceof NoAnswerError || statusOf(error) !== undefined;
}

class NoAnswerError extends Error {
  override name = 'NoAnswerError';
}

/** Runs one SDK call with a signal that aborts it when the service has not answered within the bound. */
type Bound = <T>(call: (abortSignal: AbortSignal) => Promise<T>, outer?: AbortSignal) => Promise<T>;

function boundedBy(ms: number, endpoint: string): Bound {
  return async (call, outer) => {
    const timer = new AbortController();
    const handle = setTimeout(() => timer.abort(), ms);
    try {
      return await call(outer ? AbortSignal.any([outer, timer.signal]) : timer.signal);
    } catch (error) {
      if (timer.signal.aborted && !outer?.aborted) throw new NoAnswerError(`no answer from ${endpoint} within ${ms} ms`, { cause: error });
      throw error;
    } finally {
      clearTimeout(handle);
    }
  };
}

/** A signal fixed when a listing starts, aborted by whichever page request's bound is current. */
class RelayedAbort {
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;

  async relay<T>(bound: AbortSignal, step: () => Promise<T>): Promise<T> {
    const abort = () => this.controller.abort();
    bound.addEventListener('abort', abort);
    try { return await step(); } finally { bound.removeEventListener('abort', abort); }
  }
}

/** The account's address without a query (a SAS would be one): what an error may name. */
function endpointOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`.replace(/\/$/, '');
  } catch {
    return 'the blob endpoint';
  }
}


function describeError(error: unknown): string {
  const e = (error ?? {}) as { statusCode?: unknown; code?: unknown };
  const parts: string[] = [];
  if (typeof e.statusCode === 'number') parts.push(`HTTP ${e.statusCode}`);
  if (typeof e.code === 'string' && e.code) parts.push(e.code);
  parts.push(firstLine(error));
  return parts.join(' ');
}


/** Removes the secrets of a connection string (whole string, AccountKey, SAS token, any sig=) from a text. */
function redactorFor(connectionString: string): (text: string) => string {
  const secrets = new Set<string>();
  const add = (s: string | undefined) => {
    if (!s || s.length < 4) return;
    secrets.add(s);
    secrets.add(encodeURIComponent(s));
  };
  add(connectionString);
  for (const part of connectionString.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    const name = part.slice(0, at).trim().toLowerCase();
    if (name === 'accountkey' || name === 'sharedaccesssignature') add(part.slice(at + 1).trim());
  }
  const ordered = [...secrets].sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const secret of ordered) out = out.split(secret).join('[redacted]');
    return out.replace(/([?&;]sig=)[^&;\s"']+/gi, '$1[redacted]');
  };
}
