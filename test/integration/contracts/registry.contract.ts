import { randomUUID } from 'node:crypto';
import { MAX_DOCUMENT_BYTES, SAMPLES_MAX_BYTES, type Registry } from '../../../services/platform/registry/registry';
import type { StoredCredential, WorkflowDocument } from '../../../services/platform/registry/documents';
import { entryId, journalKey, requestJourney, searchJournal, type JournalEntry } from '../../../services/platform/registry/journal';

/** The Registry contract: the file and Cosmos adapters must both pass it. */
export function describeRegistryContract(name: string, open: () => Promise<Registry>): void {
  describe(`Registry contract: ${name}`, () => {
    let registry: Registry;
    beforeAll(async () => { registry = await open(); });
    afterAll(async () => { await registry.close(); });

    const workflow = (id: string, active = true): WorkflowDocument => ({
      id, active, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'none' } }, { name: 'Next', type: 'noop' }],
    });

    test('workflows: put, get, replace, list, delete', async () => {
      const id = `wf-${randomUUID().slice(0, 8)}`;
      expect(await registry.workflows.get(id)).toBeNull();
      await registry.workflows.put(workflow(id));
      expect(await registry.workflows.get(id)).toEqual(workflow(id));
      await registry.workflows.put(workflow(id, false));
      expect((await registry.workflows.get(id))?.active).toBe(false);
      const listed = await registry.workflows.list();
      expect(listed.filter((w) => w.id === id)).toHaveLength(1);
      const ids = listed.map((w) => w.id);
      expect([...ids].sort()).toEqual(ids);
      expect(await registry.workflows.delete(id)).toBe(true);
      expect(await registry.workflows.delete(id)).toBe(false);
      expect(await registry.workflows.get(id)).toBeNull();
    });

    test('putIf and deleteIf write only over the document expected: none, or one equal as JSON in any property order', async () => {
      const id = `wf-${randomUUID().slice(0, 8)}`;
      const first = workflow(id);
      expect(await registry.workflows.putIf(first, null)).toBe(true);
      expect(await registry.workflows.putIf(workflow(id, false), null)).toBe(false);
      const reordered = { nodes: first.nodes, active: first.active, id } as WorkflowDocument;
      expect(await registry.workflows.putIf(workflow(id, false), reordered)).toBe(true);
      expect((await registry.workflows.get(id))?.active).toBe(false);
      expect(await registry.workflows.putIf({ ...first, name: 'stale' }, first)).toBe(false);
      expect((await registry.workflows.get(id))?.name).toBeUndefined();
      expect(await registry.workflows.deleteIf(first)).toBe(false);
      expect(await registry.workflows.get(id)).not.toBeNull();
      expect(await registry.workflows.deleteIf(workflow(id, false))).toBe(true);
      expect(await registry.workflows.get(id)).toBeNull();
      expect(await registry.workflows.putIf(first, workflow(id, false))).toBe(false);
      expect(await registry.workflows.get(id)).toBeNull();
    });

    test('putIf: twelve read-modify-writes of one document at once, each retried until it lands, lose none', async () => {
      const id = `wf-${randomUUID().slice(0, 8)}`;
      await registry.workflows.put({ ...workflow(id), name: '' });
      await Promise.all(Array.from({ length: 12 }, async (_, i) => {
        for (;;) {
          const before = (await registry.workflows.get(id))!;
          if (await registry.workflows.putIf({ ...before, name: `${before.name}${String.fromCharCode(97 + i)}` }, before)) return;
        }
      }));
      const name = (await registry.workflows.get(id))!.name!;
      expect([...name].sort().join('')).toBe('abcdefghijkl');
    });

    test('a document over MAX_DOCUMENT_BYTES (Cosmos DB\'s 2 MiB an item) is refused as invalid-document naming its size and the limit; nothing is stored', async () => {
      const id = `wf-${randomUUID().slice(0, 8)}`;
      const fits = { ...workflow(id), name: 'x'.repeat(MAX_DOCUMENT_BYTES - Buffer.byteLength(JSON.stringify({ ...workflow(id), name: '' }))) };
      expect(Buffer.byteLength(JSON.stringify(fits))).toBe(MAX_DOCUMENT_BYTES);
      await registry.workflows.put(fits);
      // One byte over, as UTF-8 (a two-byte character in place of a one-byte one).
      const over = { ...fits, name: `é${fits.name.slice(1)}` };
      const refusal = { code: 'invalid-document', message: `workflows/${id} would take ${MAX_DOCUMENT_BYTES + 1} bytes as JSON, over the ${MAX_DOCUMENT_BYTES} bytes (2 MiB, Cosmos DB's item limit) a registry document may take` };
      await expect(registry.workflows.put(over)).rejects.toMatchObject(refusal);
      await expect(registry.workflows.putIf(over, fits)).rejects.toMatchObject(refusal);
      await expect(registry.workflows.putIf({ ...over, id: `${id}-new` }, null)).rejects.toMatchObject({ code: 'invalid-document' });
      expect(await registry.workflows.get(id)).toEqual(fits);
      expect(await registry.workflows.get(`${id}-new`)).toBeNull();
      expect(await registry.workflows.delete(id)).toBe(true);
    });

    test('credentials keep the sealed form as given', async () => {
      const cred: StoredCredential = { id: `cred-${randomUUID().slice(0, 8)}`, type: 'headerAuth', sealed: { v: 1, iv: 'aXY=', tag: 'dGFn', data: 'ZGF0YQ==' }, updatedAt: '2026-11-22T00:00:00.000Z' };
      await registry.credentials.put(cred);
      expect(await registry.credentials.get(cred.id)).toEqual(cred);
    });

    test('samples keep the newest N per node, newest first', async () => {
      const wf = `wf-${randomUUID().slice(0, 8)}`;
      for (let i = 0; i < 5; i++) await registry.samples.append(wf, 'Orders hook', { executionId: `e${i}`, receivedAt: i, data: { n: i } }, 3);
      const got = await registry.samples.list(wf, 'Orders hook');
      expect(got.map((s) => s.executionId)).toEqual(['e4', 'e3', 'e2']);
      expect(got[0].data).toEqual({ n: 4 });
      expect(await registry.samples.list(wf, 'Other node')).toEqual([]);
      await registry.samples.append(wf, 'Orders hook', { executionId: 'e4', receivedAt: 4, data: { n: 'again' } }, 3);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e4', 'e3', 'e2']);
    });

    test('samples of a node whose name is long (the longest workflow id beside it, or 300 characters of any script) are kept and read back apart', async () => {
      const longId = `wf-${randomUUID()}`.padEnd(128, 'x');
      const names = ['N'.repeat(96), 'N'.repeat(95) + 'M', 'é☃'.repeat(150)];
      for (const [i, node] of names.entries()) await registry.samples.append(longId, node, { executionId: `e${i}`, receivedAt: i, data: { i } }, 3);
      for (const [i, node] of names.entries()) expect((await registry.samples.list(longId, node)).map((s) => s.executionId)).toEqual([`e${i}`]);
    });

    test('appendMany leaves the samples as appending each in order would: repeats skipped, the newest N kept', async () => {
      const wf = `wf-${randomUUID().slice(0, 8)}`;
      const sample = (id: string) => ({ executionId: id, receivedAt: 0, data: { id } });
      await registry.samples.append(wf, 'Orders hook', sample('e0'), 3);
      await registry.samples.appendMany(wf, 'Orders hook', ['e1', 'e0', 'e2', 'e3', 'e2', 'e4'].map(sample), 3);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e4', 'e3', 'e2']);
      await registry.samples.appendMany(wf, 'Orders hook', ['e4', 'e3'].map(sample), 3);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e4', 'e3', 'e2']);
    });

    test('samples are the newest by receivedAt: executions replayed from long ago do not go ahead of newer ones', async () => {
      const wf = `wf-${randomUUID().slice(0, 8)}`;
      const sample = (day: number) => ({ executionId: `e${day}`, receivedAt: day * 86_400_000, data: { day } });
      await registry.samples.appendMany(wf, 'Orders hook', [16, 17, 18, 19, 20].map(sample), 5);
      // A replay of days 2 to 4: their ids left the window long ago.
      await registry.samples.appendMany(wf, 'Orders hook', [2, 3, 4].map(sample), 5);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e20', 'e19', 'e18', 'e17', 'e16']);
      // One partition behind another: an older execution still within the window takes its place by time.
      await registry.samples.append(wf, 'Orders hook', sample(21), 5);
      await registry.samples.append(wf, 'Orders hook', sample(18.5), 5);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e21', 'e20', 'e19', 'e18.5', 'e18']);
    });

    test('a node\'s samples stay within SAMPLES_MAX_BYTES of UTF-8 JSON (under Cosmos DB\'s 2 MB a document): the oldest give way, the newest stays', async () => {
      const wf = `wf-${randomUUID().slice(0, 8)}`;
      // 80,000 characters, 240,000 bytes: within the per-sample bound as bytes, and ten of them pass 2 MB.
      const sample = (i: number) => ({ executionId: `e${i}`, receivedAt: i, data: { text: '漢'.repeat(80_000), i } });
      for (let i = 0; i < 10; i++) await registry.samples.append(wf, 'Orders hook', sample(i), 100);
      const kept = await registry.samples.list(wf, 'Orders hook');
      expect(kept.map((s) => s.executionId)).toEqual(['e9', 'e8', 'e7', 'e6', 'e5', 'e4']);
      expect(Buffer.byteLength(JSON.stringify(kept))).toBeLessThanOrEqual(SAMPLES_MAX_BYTES);
      await registry.samples.appendMany(wf, 'Orders hook', [10, 11, 12].map(sample), 100);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e12', 'e11', 'e10', 'e9', 'e8', 'e7']);
    });

    describe('journal', () => {
      // Each run its own workflow and requests, so a backend shared by test files (or runs) never mixes them in.
      const run = randomUUID().slice(0, 8);
      const wf = `wf-j-${run}`;
      const base = Date.now() - 3 * 86_400_000;
      const entry = (n: number, over: Partial<JournalEntry>): JournalEntry => ({
        id: entryId(`t-${run}.ingress.received.v1`, 0, String(n), 0), requestId: `req-${run}-a`, workflowId: wf, kind: 'received',
        at: base + n * 60_000, traceId: null, source: `t-${run}.ingress.received.v1/0/${n}`, replayOf: null, keys: [], detail: { n }, ...over,
      });
      const a0 = entry(0, { kind: 'received', keys: [journalKey('messageId', `<m-${run}@partner>`)], traceId: '0af7651916cd43dd8448eb211c80319c' });
      const a1 = entry(1, { kind: 'decoded', detail: { items: 2 } });
      // One entry a day later, so the range crosses days (the file adapter keeps a folder per day).
      const a2 = entry(1441, { kind: 'execution-requested', detail: { executionId: 'x1' } });
      const b0 = entry(2, { requestId: `req-${run}-b`, kind: 'decoded', keys: [journalKey('postId', `P-${run}`), journalKey('trackingId', `T-${run}`)] });
      const other = entry(3, { requestId: `req-${run}-c`, workflowId: `wf-other-${run}`, kind: 'refused', detail: { status: 401 } });

      beforeAll(async () => { await registry.journal.upsert([a0, a1, a2, b0, other]); });

      test('a request\'s journey, oldest first, with each entry as written', async () => {
        const got = await registry.journal.request(`req-${run}-a`);
        expect(got).toEqual([a0, a1, a2]);
        expect(await registry.journal.request(`req-${run}-none`)).toEqual([]);
        expect((await requestJourney(registry.journal, `req-${run}-a`, { traceUrlTemplate: 'http://jaeger:16686/trace/{traceId}' }))[0]).toMatchObject({
          at: new Date(a0.at).toISOString(), traceUrl: 'http://jaeger:16686/trace/0af7651916cd43dd8448eb211c80319c',
        });
      });

      test('writing the same entries again (a redelivery) adds nothing', async () => {
        await registry.journal.upsert([a0, a1, { ...a2, detail: { executionId: 'x1' } }]);
        expect(await registry.journal.request(`req-${run}-a`)).toHaveLength(3);
        expect(await registry.journal.search({ workflowId: wf, limit: 100 })).toHaveLength(4);
      });

      test('search by workflow: newest first, limited, paged with until', async () => {
        const all = await registry.journal.search({ workflowId: wf, limit: 100 });
        expect(all.map((e) => e.id)).toEqual([a2, b0, a1, a0].map((e) => e.id));
        const page = await registry.journal.search({ workflowId: wf, limit: 2 });
        expect(page.map((e) => e.id)).toEqual([a2.id, b0.id]);
        const next = await registry.journal.search({ workflowId: wf, limit: 2, until: page[1].at });
        expect(next.map((e) => e.id)).toEqual([a1.id, a0.id]);
      });

      test('search by each partner key, and by time range', async () => {
        expect((await searchJournal(registry.journal, { messageId: `<m-${run}@partner>` })).map((e) => e.requestId)).toEqual([`req-${run}-a`]);
        expect((await searchJournal(registry.journal, { postId: `P-${run}` })).map((e) => e.id)).toEqual([b0.id]);
        expect((await searchJournal(registry.journal, { trackingId: `T-${run}`, workflowId: wf })).map((e) => e.id)).toEqual([b0.id]);
        expect(await searchJournal(registry.journal, { trackingId: `T-${run}`, workflowId: `wf-other-${run}` })).toEqual([]);
        expect(await searchJournal(registry.journal, { postId: `P-${run}-no` })).toEqual([]);
        const ranged = await registry.journal.search({ workflowId: wf, since: a1.at, until: a2.at, limit: 100 });
        expect(ranged.map((e) => e.id)).toEqual([b0.id, a1.id]);
        const recent = await registry.journal.search({ since: base, until: base + 4 * 60_000, limit: 100 });
        expect(recent.filter((e) => e.source.startsWith(`t-${run}.`)).map((e) => e.id)).toEqual([other, b0, a1, a0].map((e) => e.id));
      });

      test('a bad query is refused with a precise error', async () => {
        await expect(registry.journal.search({ limit: 0 })).rejects.toThrow(/limit must be a whole number/);
        await expect(registry.journal.search({ limit: 5, since: 10, until: 5 })).rejects.toThrow(/since must be before until/);
        await expect(searchJournal(registry.journal, { postId: 'a', trackingId: 'b' })).rejects.toThrow(/at most one of/);
      });
    });
  });
}
