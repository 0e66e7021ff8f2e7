import { createTtlCache } from '../../services/platform/registry/ttl-cache';

test('fresh reads the source despite a cached value, and what it read is what get answers from then on', async () => {
  let version = 1;
  const loads: string[] = [];
  const cache = createTtlCache<{ version: number }>(async (key) => { loads.push(key); return { version }; }, 60_000);
  expect(await cache.get('wf')).toEqual({ version: 1 });
  version = 2;
  expect(await cache.get('wf')).toEqual({ version: 1 }); // cached
  expect(await cache.fresh('wf')).toEqual({ version: 2 });
  expect(await cache.get('wf')).toEqual({ version: 2 });
  expect(loads).toEqual(['wf', 'wf']);
});
