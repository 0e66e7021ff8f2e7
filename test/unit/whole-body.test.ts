import { errorAnswer } from '../../services/triggers/answers';
import type { InboundRequest, ReceivedBody } from '../../services/triggers/trigger';
import { createWarehouseTrigger, DEFAULT_WAREHOUSE_LIMITS } from '../../services/triggers/warehouse/warehouse-trigger';
import { heldBytes } from '../../services/triggers/held-bytes';
import { wholeBody } from '../../services/triggers/whole-body';

const request = (id: string): InboundRequest => ({ requestId: id, workflowId: 'wf', pathSuffix: null, query: {}, headers: {}, remoteAddress: null, receivedAt: 0 });
const staged = (size: number): ReceivedBody => ({ size, inline: null, sha256: () => '', readStaged: null });
const tooLarge = () => errorAnswer('payload-too-large');

test('bodies held whole share one budget; one that finds it spent is read on but not kept, and told busy', async () => {
  const budget = heldBytes(10);
  const whole = wholeBody(100, tooLarge, budget);
  const a = request('a');
  const b = request('b');
  const va = whole.validator(a);
  const vb = whole.validator(b);
  va.write(Buffer.alloc(6));
  vb.write(Buffer.alloc(3));
  vb.write(Buffer.alloc(3)); // 12 > 10, and a holds some: b lets go of what it had
  expect(budget.held()).toBe(6);
  expect(await vb.end()).toBeNull();
  expect(whole.take(b, staged(6))).toBe('busy');
  expect(await va.end()).toBeNull();
  expect(whole.take(a, staged(6))).toHaveLength(6);
  expect(budget.held()).toBe(0);
});

test('a body alone in the budget is kept even when larger than it; an abort gives its room back', async () => {
  const budget = heldBytes(10);
  const whole = wholeBody(100, tooLarge, budget);
  const big = request('big');
  const v = whole.validator(big);
  for (let i = 0; i < 5; i++) v.write(Buffer.alloc(5));
  expect(budget.held()).toBe(25);
  await v.end();
  expect(whole.take(big, staged(25))).toHaveLength(25);
  const gone = whole.validator(request('gone'));
  gone.write(Buffer.alloc(4));
  gone.abort();
  expect(budget.held()).toBe(0);
});

test('a body the receiver holds inline is never busy: its own copy is used', async () => {
  const budget = heldBytes(4);
  const whole = wholeBody(100, tooLarge, budget);
  const other = whole.validator(request('other'));
  other.write(Buffer.alloc(4));
  const small = request('small');
  const v = whole.validator(small);
  v.write(Buffer.from('{}'));
  await v.end();
  expect(whole.take(small, { size: 2, inline: Buffer.from('{}'), sha256: () => '', readStaged: null })?.toString()).toBe('{}');
});

test('the warehouse trigger answers a busy post 503 with Retry-After', async () => {
  const budget = heldBytes(10);
  const trigger = createWarehouseTrigger(DEFAULT_WAREHOUSE_LIMITS, budget);
  const node = { name: 'Warehouse', type: 'warehouseTrigger', parameters: { actions: ['dc'] } };
  const first = trigger.validator!(request('first'), node)!;
  first.write(Buffer.alloc(8));
  const second = request('second');
  const v = trigger.validator!(second, node)!;
  v.write(Buffer.from('{"Type":"DC","x":"0123"}'));
  await v.end();
  const outcome = await trigger.inspect(second, node, staged(24), { credential: async () => null, store: null as never, logger: null as never });
  expect(outcome).toMatchObject({ ok: false, answer: { status: 503, headers: { 'retry-after': '5' } } });
});
