import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import { startTestApp, type BackendChoice, type TestApp } from '../support/app';
import { allExecutions, executionsOf } from '../support/executions';
import { dcPost, rcPost } from '../fixtures/warehouse';

/** The warehouse-provider trigger (SPEC §2.4, §6), through the whole pipeline. */
function describeWarehouse(choice: BackendChoice, only?: string[]) {
  const maybe = (name: string) => (title: string, fn: () => Promise<void>) => { if (!only || only.includes(name)) test(title, fn); };
  describe(`warehouse-provider trigger on ${choice} backends`, () => {
    let app: TestApp;
    beforeAll(async () => {
      app = await startTestApp(choice, { INLINE_BODY_MAX: '4KiB', WORKFLOW_CACHE_MS: '0' });
      const sealer = createCredentialSealer(app.config.encryptionKey!);
      const { registry } = app.backends;
      await registry.credentials.put(sealer.seal({ id: 'cred-header', type: 'headerAuth', data: { name: 'X-Wise-Key', value: 'w1se-key' } }));
      const node = (id: string, parameters: Record<string, unknown>, credentials?: Record<string, string>) =>
        registry.workflows.put({ id, active: true, nodes: [{ name: 'Warehouse', type: 'warehouseTrigger', parameters, credentials }] });
      await node('wf-both', { actions: ['dc', 'rc'] });
      await node('wf-dc', { actions: ['dc'] });
      await node('wf-auth', { actions: ['dc'], authentication: 'headerAuth' }, { headerAuth: 'cred-header' });
    }, 120_000);
    afterAll(async () => { await app?.stop(); });

    const post = (workflow: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${app.baseUrl}/hook/${workflow}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body) });

    maybe('core')('DC and RC posts become executions whose output is the post as sent (zeros, blanks, nulls kept) plus duplicate', async () => {
      const dc = dcPost(`dc-${Date.now()}`);
      const res = await post('wf-both', dc);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({});
      const [{ execution, input }] = await executionsOf(app, res.headers.get('x-request-id'), 1);
      expect(execution.triggerKind).toBe('warehouse');
      expect(input).toEqual({ Warehouse: { duplicate: false, ...dc } });

      const rcText = JSON.stringify(rcPost(`rc-${Date.now()}`)).replace('"PalletQty":0', '"PalletQty":0.0,"BigId":123456789012345678901');
      const rc = await post('wf-both', rcText);
      const [{ execution: rcExecution }] = await executionsOf(app, rc.headers.get('x-request-id'), 1);
      // The JSON text reaches the workflow unparsed: 0.0 and every digit of a big id stay as sent.
      expect(rcExecution.input).toBe(`{"Warehouse":{"duplicate":false,${rcText.slice(1)}}`);
    });

    maybe('core')('only selected types start the workflow; an unknown Type is answered 200 and starts nothing', async () => {
      const rc = await post('wf-dc', rcPost('rc-unselected'));
      const unknown = await post('wf-dc', { PostId: 'x1', Type: 'ASN', Data: {} });
      expect([rc.status, unknown.status]).toEqual([200, 200]);
      const after = await post('wf-dc', dcPost(`dc-after-${Date.now()}`));
      await executionsOf(app, after.headers.get('x-request-id'), 1);
      const all = await allExecutions(app);
      for (const res of [rc, unknown]) expect(all.filter((e) => e.requestId === res.headers.get('x-request-id'))).toHaveLength(0);
      expect(app.logs.some((l) => l.msg === 'warehouse post skipped: unknown Type' && l.type === 'ASN')).toBe(true);
      expect(app.logs.some((l) => l.msg === 'warehouse post skipped: Type not selected' && l.postId === 'rc-unselected')).toBe(true);
    });

    maybe('core')('a re-post of the same PostId is marked duplicate; the first stays the original', async () => {
      const id = `dup-${Date.now()}`;
      const first = await post('wf-both', dcPost(id));
      const second = await post('wf-both', dcPost(id, { Note: 're-posted' }));
      const [one] = await executionsOf(app, first.headers.get('x-request-id'), 1);
      const [two] = await executionsOf(app, second.headers.get('x-request-id'), 1);
      expect(one.input.Warehouse.duplicate).toBe(false);
      expect(two.input.Warehouse.duplicate).toBe(true);
      expect(two.input.Warehouse.PostId).toBe(id);
      // A post that carries a duplicate of its own could say false on a re-post: refused, nothing accepted.
      const claimed = await post('wf-both', { ...dcPost(id), duplicate: false });
      expect({ status: claimed.status, body: await claimed.json() }).toEqual({ status: 400, body: { error: 'payload-parse-error', message: 'The post has a top-level "duplicate" member: this service sets it, to say whether the post repeats an earlier PostId' } });
      expect((await allExecutions(app)).filter((e) => e.requestId === claimed.headers.get('x-request-id'))).toEqual([]);
    });

    maybe('core')('invalid JSON, or JSON that is not an object, is 400 payload-parse-error and nothing is accepted', async () => {
      for (const body of ['{"PostId": "p", ', '[{"PostId":"p"}]', 'PostId=p']) {
        const res = await post('wf-both', body);
        expect(res.status).toBe(400);
        expect(((await res.json()) as { error: string }).error).toBe('payload-parse-error');
      }
      // Valid JSON nested deeper than anything after the receiver could take (json-depth.ts).
      const deep = await post('wf-both', `{"PostId":"deep","Type":"DC","Data":${'['.repeat(600)}${']'.repeat(600)}}`);
      expect(deep.status).toBe(400);
      expect(await deep.json()).toEqual({ error: 'payload-parse-error', message: 'The request body is JSON nested more than 512 levels deep' });
      // Bytes that are not UTF-8 (here Latin-1) are refused too, rather than read with U+FFFD in their place.
      const latin1 = await post('wf-both', Buffer.from(JSON.stringify(dcPost('latin-1', { Name: 'Müller' })), 'latin1'));
      expect(latin1.status).toBe(400);
      expect(await latin1.json()).toEqual({ error: 'payload-parse-error', message: 'The request body is not valid UTF-8' });
      // A large bad post (past the inline size: it streams to the store) is judged the same way.
      const res = await post('wf-both', `{"PostId":"big","Type":"DC","Data":{"x":"${'y'.repeat(20_000)}"}`);
      expect(res.status).toBe(400);
    });

    maybe('core')('a large post (claim-checked) arrives whole', async () => {
      const dc = dcPost(`big-${Date.now()}`, { Items: Array.from({ length: 400 }, (_, i) => ({ ItemNumber: `SKU-${i}`, OrderedQty: i, ShippedQty: i, UOM: 'EA', LineNo: String(i) })) });
      const res = await post('wf-both', dc);
      const [{ input }] = await executionsOf(app, res.headers.get('x-request-id'), 1);
      expect(input.Warehouse.Data.Items).toHaveLength(400);
    });

    maybe('core')('a post larger than one decoded record can carry is 413 at the door, not a 200 and a dead letter', async () => {
      const big = dcPost(`huge-${Date.now()}`, { Blob: 'z'.repeat(8 * 1024 * 1024) });
      const res = await post('wf-both', big);
      expect(res.status).toBe(413);
      expect(((await res.json()) as { error: string }).error).toBe('payload-too-large');
    });

    maybe('auth')('Header Auth applies when the node sets it', async () => {
      expect((await post('wf-auth', dcPost('a1'))).status).toBe(401);
      expect((await post('wf-auth', dcPost('a1'), { 'x-wise-key': 'wrong' })).status).toBe(403);
      const res = await post('wf-auth', dcPost(`a-${Date.now()}`), { 'x-wise-key': 'w1se-key' });
      expect(res.status).toBe(200);
      const [{ execution }] = await executionsOf(app, res.headers.get('x-request-id'), 1);
      const received = JSON.stringify(execution);
      expect(received).not.toContain('w1se-key');
    });
  });
}

describeWarehouse('embedded');
describeWarehouse('real', ['core']);
