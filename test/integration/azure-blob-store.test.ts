import { createHash, randomBytes, randomUUID } from 'node:crypto';
import * as http from 'node:http';
import { inspect } from 'node:util';
import { Readable } from 'node:stream';
import { BlobServiceClient, ContainerSASPermissions, generateBlobSASQueryParameters, StorageSharedKeyCredential } from '@azure/storage-blob';
import { openAzureBlobStore } from '../../services/platform/store/azure-blob-store';
import { ObjectStoreError, type ObjectStore } from '../../services/platform/store/object-store';
import { ConfigError } from '../../services/platform/config/config';
import { describeObjectStoreContract, readAll } from './contracts/object-store.contract';
import { startStallingProxy } from '../support/stalling-proxy';
import { isBackendOutage } from '../../services/platform/log/dead-lettering';

/** Set by the jest globalSetup, which starts Azurite. Without it this suite must fail, not skip. */
const connectionString = process.env.TEST_AZURE_STORAGE_CONNECTION_STRING;
if (!connectionString) {
  throw new Error('TEST_AZURE_STORAGE_CONNECTION_STRING is not set: the jest globalSetup (test/support/global-setup.ts) starts Azurite and exports it; run the suite through the project jest config');
}
const conn: string = connectionString;

/** One container per test file and run, so parallel files and repeated runs never meet. */
const container = `it-blob-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
const accountKey = /(?:^|;)\s*AccountKey=([^;]+)/i.exec(conn)?.[1] ?? '';
const azuriteAddress = () => {
  const endpoint = new URL(/BlobEndpoint=([^;]+)/i.exec(conn)?.[1] ?? '');
  return { host: endpoint.hostname, port: Number(endpoint.port) };
};

afterAll(async () => {
  await BlobServiceClient.fromConnectionString(conn).getContainerClient(container).deleteIfExists();
});

describeObjectStoreContract('azure blob (Azurite)', () => openAzureBlobStore({ connectionString: conn, container }));

describe('azure blob store: adapter specifics', () => {
  let store: ObjectStore;
  beforeAll(async () => { store = await openAzureBlobStore({ connectionString: conn, container }); });
  afterAll(async () => { await store.close(); });
  const prefix = () => `specific/${randomUUID()}`;

  /** `count` chunks of 1 MiB with distinct bytes, then (optionally) an error. */
  function mebibytes(count: number, failAfter?: number): { chunks: Buffer[]; stream: Readable } {
    const chunks = Array.from({ length: count }, (_, i) => Buffer.alloc(1024 * 1024, i + 1));
    async function* gen() {
      for (let i = 0; i < chunks.length; i++) {
        if (failAfter !== undefined && i === failAfter) {
          // Give the staged blocks time to land, so the failure meets uncommitted blocks on the server.
          await new Promise((resolve) => setTimeout(resolve, 300));
          throw new Error('client went away');
        }
        yield chunks[i];
      }
    }
    return { chunks, stream: Readable.from(gen()) };
  }

  test('the key and the connection string appear in no error (wrong AccountKey)', async () => {
    expect(accountKey).not.toBe('');
    const wrongKey = Buffer.from(`not-the-key-${randomUUID()}`).toString('base64');
    const wrong = conn.replace(accountKey, wrongKey);
    const err = await openAzureBlobStore({ connectionString: wrong, container }).catch((e) => e);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect(err.code).toBe('store-unavailable');
    expect(err.message).toMatch(/HTTP 403/);
    const everything = `${err.message}\n${err.stack}\n${inspect(err, { depth: 10 })}`;
    for (const secret of [wrongKey, accountKey, wrong, conn]) expect(everything).not.toContain(secret);
  });

  test('an unreachable endpoint is store-unavailable, without the key in the message', async () => {
    const unreachable = conn.replace(/BlobEndpoint=[^;]+/i, 'BlobEndpoint=http://127.0.0.1:9/devstoreaccount1');
    expect(unreachable).not.toBe(conn);
    const err = await openAzureBlobStore({ connectionString: unreachable, container }).catch((e) => e);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect(err.code).toBe('store-unavailable');
    expect(`${err.message}\n${inspect(err, { depth: 10 })}`).not.toContain(accountKey);
  });

  test('an endpoint that takes connections and never answers: open fails as store-unavailable, naming the endpoint', async () => {
    const proxy = await startStallingProxy(azuriteAddress());
    proxy.stall();
    try {
      const silent = conn.replace(/BlobEndpoint=[^;]+/i, `BlobEndpoint=http://127.0.0.1:${proxy.port}/devstoreaccount1`);
      const err = await openAzureBlobStore({ connectionString: silent, container, answerTimeoutMs: 1_000 }).catch((e) => e);
      expect(err).toBeInstanceOf(ObjectStoreError);
      expect(err.code).toBe('store-unavailable');
      expect(err.message).toContain(`could not open container ${container}: no answer from http://127.0.0.1:${proxy.port}/devstoreaccount1`);
      expect(`${err.message}\n${inspect(err, { depth: 10 })}`).not.toContain(accountKey);
    } finally {
      await proxy.close();
    }
  }, 60_000);

  test('a store whose endpoint stops answering: put, get, head, delete and list fail as store-unavailable', async () => {
    const proxy = await startStallingProxy(azuriteAddress());
    try {
      const viaProxy = conn.replace(/BlobEndpoint=[^;]+/i, `BlobEndpoint=http://127.0.0.1:${proxy.port}/devstoreaccount1`);
      const stalling = await openAzureBlobStore({ connectionString: viaProxy, container, answerTimeoutMs: 1_000 });
      const base = prefix();
      await stalling.put(`${base}/there.txt`, Buffer.from('there'));
      proxy.stall();
      const { stream } = mebibytes(6);
      const calls: Record<string, () => Promise<unknown>> = {
        'put (one block)': () => stalling.put(`${base}/small.txt`, Buffer.from('small')),
        'put (several blocks)': () => stalling.put(`${base}/big.bin`, stream),
        get: () => stalling.get(`${base}/there.txt`),
        head: () => stalling.head(`${base}/there.txt`),
        delete: () => stalling.delete(`${base}/there.txt`),
        list: async () => { for await (const p of stalling.list(`${base}/`)) void p; },
      };
      const outcomes = await Promise.all(Object.entries(calls).map(([what, call]) =>
        call().then(() => [what, 'succeeded'], (e: { code?: unknown; message?: unknown }) => [what, e.code, String(e.message).includes('no answer from')])));
      expect(outcomes).toEqual(Object.keys(calls).map((what) => [what, 'store-unavailable', true]));
    } finally {
      await proxy.close();
    }
  }, 60_000);

  /** A connection string holding only a SAS scoped to one container (no account key): least privilege. */
  function containerSas(name: string, permissions: string): string {
    const account = /AccountName=([^;]+)/i.exec(conn)?.[1] ?? '';
    const endpoint = /BlobEndpoint=([^;]+)/i.exec(conn)?.[1] ?? '';
    const sas = generateBlobSASQueryParameters(
      { containerName: name, permissions: ContainerSASPermissions.parse(permissions), expiresOn: new Date(Date.now() + 3_600_000) },
      new StorageSharedKeyCredential(account, accountKey),
    ).toString();
    return `BlobEndpoint=${endpoint};SharedAccessSignature=${sas}`;
  }

  test('a container SAS (racwdl) for an existing container opens the store, which then works', async () => {
    const sasStore = await openAzureBlobStore({ connectionString: containerSas(container, 'racwdl'), container });
    try {
      const p = `${prefix()}/via-sas.txt`;
      await sasStore.put(p, Buffer.from('least privilege'), { contentType: 'text/plain' });
      expect((await readAll(await sasStore.get(p))).toString()).toBe('least privilege');
      expect(await sasStore.head(p)).toMatchObject({ size: 15, contentType: 'text/plain' });
      const listed: string[] = [];
      for await (const q of sasStore.list(p)) listed.push(q);
      expect(listed).toEqual([p]);
      expect(await sasStore.delete(p)).toBe(true);
    } finally {
      await sasStore.close();
    }
  });

  test('a container SAS without list: the start fails naming the list permission, without the signature', async () => {
    const sasConn = containerSas(container, 'racwd');
    const err = await openAzureBlobStore({ connectionString: sasConn, container }).catch((e) => e);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect(err.code).toBe('store-unavailable');
    expect(err.message).toMatch(/HTTP 403 .*may neither create nor list .*list permission \(l\)/);
    const sig = /sig=([^&;]+)/.exec(sasConn)?.[1] ?? '';
    expect(sig).not.toBe('');
    expect(`${err.message}\n${inspect(err, { depth: 10 })}`).not.toContain(decodeURIComponent(sig));
  });

  test('a container SAS for a container that does not exist: the start fails saying so', async () => {
    const missing = `it-blob-missing-${randomBytes(4).toString('hex')}`;
    const err = await openAzureBlobStore({ connectionString: containerSas(missing, 'racwdl'), container: missing }).catch((e) => e);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect(err.code).toBe('store-unavailable');
    expect(err.message).toMatch(/HTTP 404 .*the container does not exist, and this connection string may not create it/);
    expect(await BlobServiceClient.fromConnectionString(conn).getContainerClient(missing).exists()).toBe(false);
  });

  test('a connection string the SDK refuses is a configuration error naming the variable, without the string', async () => {
    // The config's load-time check passes it (AccountName= is there); the SDK needs AccountKey or a SAS as well.
    for (const refused of ['AccountName=x', `AccountName=devstoreaccount1;BlobEndpoint=${/BlobEndpoint=([^;]+)/i.exec(conn)?.[1]}`]) {
      const err = await openAzureBlobStore({ connectionString: refused, container }).catch((e) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.message).toMatch(/AZURE_STORAGE_CONNECTION_STRING: the Azure SDK did not accept it/);
      expect(err.message).not.toContain(refused);
    }
  });

  test('an invalid container name is refused before any request', async () => {
    await expect(openAzureBlobStore({ connectionString: conn, container: 'Not_Valid' })).rejects.toMatchObject({ code: 'store-unavailable' });
  });

  test('a multi-block body that fails midway commits nothing and leaves the previous object intact', async () => {
    const p = `${prefix()}/replace.bin`;
    const first = await store.put(p, Buffer.from('version 1'), { contentType: 'text/plain' });
    // 9 MiB arrive (two 4 MiB blocks staged) before the body fails.
    const { stream } = mebibytes(12, 9);
    await expect(store.put(p, stream, { contentType: 'application/octet-stream' })).rejects.toBeInstanceOf(ObjectStoreError);
    expect(await store.head(p)).toEqual(first);
    expect((await readAll(await store.get(p))).toString()).toBe('version 1');
  });

  test('a multi-block body that fails midway leaves no new object, not even in the listing', async () => {
    const base = prefix();
    const { stream } = mebibytes(10, 9);
    await expect(store.put(`${base}/broken.bin`, stream)).rejects.toThrow();
    const blob = BlobServiceClient.fromConnectionString(conn).getContainerClient(container).getBlockBlobClient(`${base}/broken.bin`);
    // Whether some blocks reached the server (uncommitted) depends on timing (a staging request in flight
    // is aborted with the body); either way the blob itself does not exist.
    expect(await blob.exists()).toBe(false);
    expect(await store.head(`${base}/broken.bin`)).toBeNull();
    await expect(store.get(`${base}/broken.bin`)).rejects.toMatchObject({ code: 'not-found' });
    const listed: string[] = [];
    for await (const p of store.list(`${base}/`)) listed.push(p);
    expect(listed).toEqual([]);
  });

  test('maxBytes crossed after several staged blocks: too-large and nothing stored', async () => {
    const p = `${prefix()}/over.bin`;
    const { stream } = mebibytes(14);
    const err = await store.put(p, stream, { maxBytes: 10 * 1024 * 1024 }).catch((e) => e);
    expect(err).toBeInstanceOf(ObjectStoreError);
    expect(err.code).toBe('too-large');
    expect(await store.head(p)).toBeNull();
  });

  test('a body of exactly maxBytes is accepted; sha256 and type are stored on the blob', async () => {
    const p = `${prefix()}/exact.bin`;
    const { chunks, stream } = mebibytes(9);
    const expected = Buffer.concat(chunks);
    const stored = await store.put(p, stream, { maxBytes: expected.length, contentType: 'application/x-test' });
    expect(stored).toEqual({ path: p, size: expected.length, sha256: createHash('sha256').update(expected).digest('hex'), contentType: 'application/x-test' });
    expect(await store.head(p)).toEqual(stored);
    expect((await readAll(await store.get(p))).equals(expected)).toBe(true);
    const props = await BlobServiceClient.fromConnectionString(conn).getContainerClient(container).getBlobClient(p).getProperties();
    expect(props.contentType).toBe('application/x-test');
    expect(props.metadata?.sha256).toBe(stored.sha256);
  });

  test('without a contentType, head reports null like the filesystem store', async () => {
    const p = `${prefix()}/untyped`;
    const stored = await store.put(p, Buffer.from('x'));
    expect(stored.contentType).toBeNull();
    expect(await store.head(p)).toEqual(stored);
  });

  test('an empty body is an empty object', async () => {
    const p = `${prefix()}/empty`;
    const stored = await store.put(p, Readable.from([]));
    expect(stored).toMatchObject({ size: 0, sha256: createHash('sha256').digest('hex') });
    expect(await readAll(await store.get(p))).toEqual(Buffer.alloc(0));
  });

  test('a single Buffer larger than a block is split into blocks', async () => {
    const p = `${prefix()}/one-buffer.bin`;
    const body = randomBytes(9 * 1024 * 1024 + 123);
    const stored = await store.put(p, body);
    expect(stored.size).toBe(body.length);
    expect((await readAll(await store.get(p))).equals(body)).toBe(true);
  });

  test('a container deleted under a running store is an outage, not an object missing: get, head and readVersioned are store-unavailable', async () => {
    // What a missing object means is acted on (no failure MDN kept: the processed one goes out; no evidence: the
    // MDN is sent), so a missing container must not read as one.
    const gone = `it-gone-${randomBytes(4).toString('hex')}`;
    const doomed = await openAzureBlobStore({ connectionString: conn, container: gone });
    try {
      await doomed.put('a/b', Buffer.from('x'));
      await BlobServiceClient.fromConnectionString(conn).getContainerClient(gone).delete();
      await expect(doomed.get('a/b')).rejects.toMatchObject({ code: 'store-unavailable' });
      await expect(doomed.head('a/b')).rejects.toMatchObject({ code: 'store-unavailable' });
      await expect(doomed.readVersioned('a/b')).rejects.toMatchObject({ code: 'store-unavailable' });
    } finally {
      await doomed.close();
      await BlobServiceClient.fromConnectionString(conn).getContainerClient(gone).deleteIfExists();
    }
  });

  /**
   * An HTTP proxy to Azurite whose GET answers can send their headers and the first 10 bytes of the body, then
   * nothing more with the connection kept open (stall), or then cut the connection (reset).
   */
  async function startBodyFaultProxy(): Promise<{ port: number; fault: 'none' | 'stall' | 'reset'; close(): Promise<void> }> {
    const target = azuriteAddress();
    const held = new Set<http.ServerResponse>();
    const proxy = {
      port: 0,
      fault: 'none' as 'none' | 'stall' | 'reset',
      async close() {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      },
    };
    const server = http.createServer((req, res) => {
      const fault = req.method === 'GET' ? proxy.fault : 'none';
      const upstream = http.request({ host: target.host, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (fault === 'none') { answer.pipe(res); return; }
        answer.once('data', (chunk: Buffer) => {
          answer.destroy();
          res.write(chunk.subarray(0, 10));
          if (fault === 'stall') held.add(res);
          else setTimeout(() => res.socket?.destroy(), 50);
        });
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy.port = (server.address() as { port: number }).port;
    return proxy;
  }

  describe('a body that stalls or breaks off once the answer has started', () => {
    /** Small, so the tests are quick; the assertions are on the outcome, never on how long it took. */
    const answerTimeoutMs = 1_000;
    let proxy: Awaited<ReturnType<typeof startBodyFaultProxy>>;
    let viaProxy: ObjectStore;
    const content = randomBytes(100_000);
    const p = `${prefix()}/body.bin`;
    beforeAll(async () => {
      proxy = await startBodyFaultProxy();
      viaProxy = await openAzureBlobStore({ connectionString: conn.replace(/BlobEndpoint=[^;]+/i, `BlobEndpoint=http://127.0.0.1:${proxy.port}/devstoreaccount1`), container, answerTimeoutMs });
      await viaProxy.put(p, content);
    });
    afterEach(() => { proxy.fault = 'none'; });
    afterAll(async () => {
      await viaProxy.close();
      await proxy.close();
    });

    test('a stalled body: get\'s stream and readVersioned fail as store-unavailable, naming the endpoint, not the key', async () => {
      proxy.fault = 'stall';
      const stream = await viaProxy.get(p);
      const err = await readAll(stream).catch((e) => e);
      expect(err).toBeInstanceOf(ObjectStoreError);
      expect(err.code).toBe('store-unavailable');
      expect(err.message).toContain(`could not read ${p}: no more of the body from http://127.0.0.1:${proxy.port}/devstoreaccount1 within ${answerTimeoutMs} ms (after 10 bytes)`);
      expect(`${err.message}\n${inspect(err, { depth: 10 })}`).not.toContain(accountKey);
      await expect(viaProxy.readVersioned(p)).rejects.toMatchObject({ name: 'ObjectStoreError', code: 'store-unavailable' });
    }, 30_000);

    test('a reader that pauses longer than the wait while the body is held back is not failed', async () => {
      // Large enough that the server is held back by the reader (back-pressure) while it pauses.
      const big = `${prefix()}/big.bin`;
      const bytes = randomBytes(4 * 1024 * 1024);
      await viaProxy.put(big, bytes);
      const chunks: Buffer[] = [];
      let paused = false;
      for await (const chunk of await viaProxy.get(big)) {
        chunks.push(chunk as Buffer);
        if (!paused) {
          paused = true;
          await new Promise((resolve) => setTimeout(resolve, 2.5 * answerTimeoutMs));
        }
      }
      expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
    }, 30_000);

    test('a body cut off mid-way is store-unavailable (an outage a stage waits out), without the SAS signature', async () => {
      const sasConn = containerSas(container, 'racwdl').replace(/BlobEndpoint=[^;]+/i, `BlobEndpoint=http://127.0.0.1:${proxy.port}/devstoreaccount1`);
      const sasStore = await openAzureBlobStore({ connectionString: sasConn, container, answerTimeoutMs });
      try {
        proxy.fault = 'reset';
        const err = await readAll(await sasStore.get(p)).catch((e) => e);
        expect(err).toBeInstanceOf(ObjectStoreError);
        expect(err.code).toBe('store-unavailable');
        expect(err.message).toBe(`azure blob store could not read ${p}: the body broke off after 10 bytes`);
        expect(isBackendOutage(err)).toBe(true);
        const sig = /sig=([^&;]+)/.exec(sasConn)?.[1] ?? '';
        expect(sig).not.toBe('');
        const everything = `${err.message}\n${inspect(err, { depth: 10 })}`;
        expect(everything).not.toContain(sig);
        expect(everything).not.toContain(decodeURIComponent(sig));
        await expect(sasStore.readVersioned(p)).rejects.toMatchObject({ name: 'ObjectStoreError', code: 'store-unavailable' });
      } finally {
        await sasStore.close();
      }
    }, 30_000);
  });

  test('get and head refuse bad paths too', async () => {
    await expect(store.get('../x')).rejects.toMatchObject({ code: 'invalid-path' });
    await expect(store.head('a//b')).rejects.toMatchObject({ code: 'invalid-path' });
  });
});
