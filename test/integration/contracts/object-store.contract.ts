import { randomUUID } from 'node:crypto';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { MAX_VERSIONED_BYTES, ObjectStoreError, type ObjectStore } from '../../../services/platform/store/object-store';

export async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/**
 * The ObjectStore contract: the filesystem and Azure Blob adapters must both pass it. `open` may be called more
 * than once: each call is another client of the same store (as another process would open it).
 */
export function describeObjectStoreContract(name: string, open: () => Promise<ObjectStore>): void {
  describe(`ObjectStore contract: ${name}`, () => {
    let store: ObjectStore;
    let prefix: string;
    beforeAll(async () => { store = await open(); });
    afterAll(async () => { await store.close(); });
    beforeEach(() => { prefix = `contract/${randomUUID()}`; });

    test('put then get and head return the same bytes, size, hash and type', async () => {
      const body = Buffer.from('{"hello":"world"}');
      const stored = await store.put(`${prefix}/a.json`, body, { contentType: 'application/json' });
      expect(stored).toEqual({ path: `${prefix}/a.json`, size: body.length, sha256: createHash('sha256').update(body).digest('hex'), contentType: 'application/json' });
      expect(await readAll(await store.get(`${prefix}/a.json`))).toEqual(body);
      expect(await store.head(`${prefix}/a.json`)).toMatchObject({ size: body.length, sha256: stored.sha256, contentType: 'application/json' });
    });

    test('a streamed put of several MiB keeps every byte', async () => {
      const chunk = Buffer.alloc(64 * 1024, 7);
      const chunks = Array.from({ length: 80 }, (_, i) => Buffer.from(chunk.map((b) => (b + i) & 0xff)));
      const expected = Buffer.concat(chunks);
      const stored = await store.put(`${prefix}/big.bin`, Readable.from(chunks));
      expect(stored.size).toBe(expected.length);
      expect(stored.sha256).toBe(createHash('sha256').update(expected).digest('hex'));
      expect((await readAll(await store.get(`${prefix}/big.bin`))).equals(expected)).toBe(true);
    });

    test('delete removes an object and says whether there was one', async () => {
      await store.put(`${prefix}/gone.txt`, Buffer.from('x'));
      expect(await store.delete(`${prefix}/gone.txt`)).toBe(true);
      expect(await store.head(`${prefix}/gone.txt`)).toBeNull();
      expect(await store.delete(`${prefix}/gone.txt`)).toBe(false);
    });

    test('missing objects: get throws not-found, head returns null', async () => {
      await expect(store.get(`${prefix}/missing`)).rejects.toMatchObject({ code: 'not-found' });
      expect(await store.head(`${prefix}/missing`)).toBeNull();
    });

    test('list returns the paths under a prefix in order', async () => {
      await store.put(`${prefix}/x/2.txt`, Buffer.from('2'));
      await store.put(`${prefix}/x/1.txt`, Buffer.from('1'));
      await store.put(`${prefix}/y/3.txt`, Buffer.from('3'));
      const listed: string[] = [];
      for await (const p of store.list(`${prefix}/x/`)) listed.push(p);
      expect(listed).toEqual([`${prefix}/x/1.txt`, `${prefix}/x/2.txt`]);
    });

    test('a body over maxBytes is refused and nothing is stored', async () => {
      const err = await store.put(`${prefix}/over.bin`, Readable.from([Buffer.alloc(600), Buffer.alloc(600)]), { maxBytes: 1000 }).catch((e) => e);
      expect(err).toBeInstanceOf(ObjectStoreError);
      expect(err.code).toBe('too-large');
      expect(await store.head(`${prefix}/over.bin`)).toBeNull();
    });

    test('a body stream that fails leaves no object', async () => {
      async function* failing() { yield Buffer.from('partial'); throw new Error('client went away'); }
      await expect(store.put(`${prefix}/broken.bin`, Readable.from(failing()))).rejects.toThrow();
      expect(await store.head(`${prefix}/broken.bin`)).toBeNull();
    });

    test('ifAbsent creates only: an existing object is left as it was and the put fails with already-exists', async () => {
      const first = await store.put(`${prefix}/once.txt`, Buffer.from('first'), { ifAbsent: true, contentType: 'text/plain' });
      expect(first.size).toBe(5);
      const err = await store.put(`${prefix}/once.txt`, Buffer.from('second, longer'), { ifAbsent: true }).catch((e) => e);
      expect(err).toBeInstanceOf(ObjectStoreError);
      expect(err.code).toBe('already-exists');
      expect((await readAll(await store.get(`${prefix}/once.txt`))).toString()).toBe('first');
      expect(await store.head(`${prefix}/once.txt`)).toMatchObject({ size: 5, sha256: first.sha256, contentType: 'text/plain' });
      // A streamed body past one block is refused the same way; an unconditional put still replaces.
      const big = Buffer.alloc(5 * 1024 * 1024, 1);
      await expect(store.put(`${prefix}/once.txt`, Readable.from([big.subarray(0, 3 << 20), big.subarray(3 << 20)]), { ifAbsent: true })).rejects.toMatchObject({ code: 'already-exists' });
      await store.put(`${prefix}/once.txt`, Buffer.from('replaced'));
      expect((await readAll(await store.get(`${prefix}/once.txt`))).toString()).toBe('replaced');
      expect(await store.head(`${prefix}/once.txt`)).toMatchObject({ size: 8 });
    });

    test('of concurrent ifAbsent puts of one path exactly one stores its bytes', async () => {
      const bodies = ['a', 'bb', 'ccc', 'dddd'].map((b) => Buffer.from(b));
      const results = await Promise.allSettled(bodies.map((b) => store.put(`${prefix}/race.txt`, b, { ifAbsent: true })));
      const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      expect(won).toHaveLength(1);
      expect(results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(['already-exists', 'already-exists', 'already-exists']);
      expect(await readAll(await store.get(`${prefix}/race.txt`))).toEqual(bodies[won[0]]);
      expect(await store.head(`${prefix}/race.txt`)).toMatchObject({ size: bodies[won[0]].length });
    });

    test('concurrent puts of one path, from two clients as from two processes, leave one put\'s data and metadata; head never mixes two puts', async () => {
      const other = await open(); // a second client of the same store, sharing nothing with the first but the store
      try {
        const at = `${prefix}/raced.txt`;
        const bodies = Array.from({ length: 6 }, (_, i) => Buffer.from(`put ${i};`.repeat(i + 1)));
        const putOf = (i: number) => ({ path: at, size: bodies[i].length, sha256: createHash('sha256').update(bodies[i]).digest('hex'), contentType: `text/x-put-${i}` });
        for (let round = 0; round < 8; round++) {
          const seen: unknown[] = [];
          let racing = true;
          const reader = (async () => { while (racing) { const head = await store.head(at); if (head) seen.push(head); await new Promise(setImmediate); } })();
          try {
            await Promise.all(bodies.map((body, i) => (i % 2 ? other : store).put(at, body, { contentType: `text/x-put-${i}` })));
          } finally {
            racing = false;
            await reader;
          }
          const content = await readAll(await store.get(at));
          const last = bodies.findIndex((b) => b.equals(content));
          expect(last).toBeGreaterThanOrEqual(0);
          expect({ round, head: await store.head(at) }).toEqual({ round, head: putOf(last) });
          expect({ round, head: await other.head(at) }).toEqual({ round, head: putOf(last) });
          // Read while the puts ran: each answer is one put's, whole.
          for (const head of seen) expect(bodies.map((_, i) => putOf(i))).toContainEqual(head);
        }
      } finally {
        await other.close();
      }
    });

    test('swap replaces only the version it names, or with null only no object; readVersioned says which one is there', async () => {
      const at = `${prefix}/mark.json`;
      await expect(store.readVersioned(at)).rejects.toMatchObject({ code: 'not-found' });
      const first = await store.swap(at, Buffer.from('first'), null, { contentType: 'application/json' });
      expect(await store.readVersioned(at)).toEqual({ content: Buffer.from('first'), version: first });
      await expect(store.swap(at, Buffer.from('not absent'), null)).rejects.toMatchObject({ code: 'changed' });
      const second = await store.swap(at, Buffer.from('second'), first, { contentType: 'application/json' });
      expect(second).not.toBe(first);
      expect(await store.readVersioned(at)).toEqual({ content: Buffer.from('second'), version: second });
      expect(await store.head(at)).toMatchObject({ size: 6, sha256: createHash('sha256').update('second').digest('hex'), contentType: 'application/json' });
      // A writer still holding the first version (one that another has overwritten since) stores nothing.
      const stale = await store.swap(at, Buffer.from('stale'), first).catch((e) => e);
      expect(stale).toBeInstanceOf(ObjectStoreError);
      expect(stale.code).toBe('changed');
      expect((await store.readVersioned(at)).content.toString()).toBe('second');
      // Nor over a deleted object.
      await store.delete(at);
      await expect(store.swap(at, Buffer.from('gone'), second)).rejects.toMatchObject({ code: 'changed' });
      expect(await store.head(at)).toBeNull();
    });

    test('of concurrent swaps of one version, from two clients as from two processes, exactly one stores its bytes', async () => {
      const other = await open();
      try {
        const at = `${prefix}/swapped.json`;
        let version = await store.swap(at, Buffer.from('start'), null);
        for (let round = 0; round < 4; round++) {
          const bodies = Array.from({ length: 6 }, (_, i) => Buffer.from(`round ${round} swap ${i}`));
          const results = await Promise.allSettled(bodies.map((body, i) => (i % 2 ? other : store).swap(at, body, version)));
          const won = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
          expect({ round, won: won.length }).toEqual({ round, won: 1 });
          expect(results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(Array(5).fill('changed'));
          version = (results[won[0]] as PromiseFulfilledResult<string>).value;
          expect(await other.readVersioned(at)).toEqual({ content: bodies[won[0]], version });
        }
      } finally {
        await other.close();
      }
    });

    test('readVersioned refuses an object larger than MAX_VERSIONED_BYTES rather than reading it whole', async () => {
      const big = `${prefix}/big-versioned.bin`;
      await store.put(big, Buffer.alloc(MAX_VERSIONED_BYTES + 1));
      await expect(store.readVersioned(big)).rejects.toMatchObject({ code: 'too-large' });
    });

    test('paths that could escape are refused', async () => {
      for (const bad of ['../etc/passwd', `${prefix}/../x`, '/abs', `${prefix}//x`, `${prefix}/a\u0000b`, '']) {
        await expect(store.put(bad, Buffer.from('x'))).rejects.toMatchObject({ code: 'invalid-path' });
      }
    });
  });
}
