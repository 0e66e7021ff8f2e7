import { oneAtATime } from '../../services/admin/operations/one-at-a-time';

test('work runs one piece at a time, in the order asked, and a failure is its caller\'s alone', async () => {
  const queue = oneAtATime();
  const events: string[] = [];
  let running = 0;
  const piece = (name: string, ms: number, fail = false) => queue(async () => {
    running++;
    events.push(`start ${name} (${running} running)`);
    await new Promise((resolve) => setTimeout(resolve, ms));
    running--;
    events.push(`end ${name}`);
    if (fail) throw new Error(`${name} failed`);
    return name;
  });
  const results = await Promise.allSettled([piece('a', 20), piece('b', 1, true), piece('c', 5)]);
  expect(results).toEqual([
    { status: 'fulfilled', value: 'a' },
    { status: 'rejected', reason: new Error('b failed') },
    { status: 'fulfilled', value: 'c' },
  ]);
  expect(events).toEqual(['start a (1 running)', 'end a', 'start b (1 running)', 'end b', 'start c (1 running)', 'end c']);
});

test('two queues do not wait on each other', async () => {
  const [one, two] = [oneAtATime(), oneAtATime()];
  let release!: () => void;
  const blocked = one(() => new Promise<void>((resolve) => { release = resolve; }));
  await expect(two(async () => 'ran')).resolves.toBe('ran');
  release();
  await blocked;
});
