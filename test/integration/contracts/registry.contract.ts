import { randomUUID } from 'node:crypto';
import type { Registry } from '../../../services/platform/registry/registry';
import type { StoredCredential, WorkflowDocument } from '../../../services/platform/registry/documents';

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

    test('appendMany leaves the samples as appending each in order would: repeats skipped, the newest N kept', async () => {
      const wf = `wf-${randomUUID().slice(0, 8)}`;
      const sample = (id: string) => ({ executionId: id, receivedAt: 0, data: { id } });
      await registry.samples.append(wf, 'Orders hook', sample('e0'), 3);
      await registry.samples.appendMany(wf, 'Orders hook', ['e1', 'e0', 'e2', 'e3', 'e2', 'e4'].map(sample), 3);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e4', 'e3', 'e2']);
      await registry.samples.appendMany(wf, 'Orders hook', ['e4', 'e3'].map(sample), 3);
      expect((await registry.samples.list(wf, 'Orders hook')).map((s) => s.executionId)).toEqual(['e4', 'e3', 'e2']);
    });
  });
}
