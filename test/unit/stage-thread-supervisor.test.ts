import { superviseStageThread, type StageThread } from '../../services/cli/stage-thread';
import { createLogger } from '../../services/platform/logger/logger';

/**
 * superviseStageThread's bookkeeping, with stand-in threads (no worker is started): which thread a stop reaches
 * while a successor is starting. The restarts themselves run on real workers in stage-threads.test.ts.
 */
interface FakeThread extends StageThread { calls: string[]; end(error: Error): void }

function fakeThread(name: string, calls: string[]): FakeThread {
  let end: (error: Error) => void = () => undefined;
  const failed = new Promise<Error>((resolve) => { end = resolve; });
  let exited: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => { exited = resolve; });
  return {
    calls, readiness: [], failed, closed,
    end(error) { end(error); exited(); },
    async stop() { calls.push(`${name}.stop`); exited(); },
    async stopping() { calls.push(`${name}.stopping`); },
  };
}

const quiet = createLogger({ level: 'error', write: () => undefined });

test('a stop asked for while a successor starts reaches the successor too, before its stop', async () => {
  const calls: string[] = [];
  const first = fakeThread('first', calls);
  let startSecond: (thread: StageThread) => void = () => undefined;
  let starts = 0;
  const supervised = await superviseStageThread(() => {
    starts++;
    return starts === 1 ? Promise.resolve(first) : new Promise<StageThread>((resolve) => { startSecond = resolve; });
  }, quiet);
  first.end(new Error('worker ended'));
  // The successor starts after the restart delay (1 s).
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  expect(starts).toBe(2);
  const told = supervised.stopping();
  const stopped = supervised.stop();
  startSecond(fakeThread('second', calls));
  await Promise.all([told, stopped]);
  // The ended one is stopped last, as before: on a worker that has exited that only releases this thread's side.
  expect(calls).toEqual(['first.stopping', 'second.stopping', 'second.stop', 'first.stop']);
});

test('a successor that comes up after stopping() was called, before stop(), is told at once', async () => {
  const calls: string[] = [];
  const first = fakeThread('first', calls);
  let startSecond: (thread: StageThread) => void = () => undefined;
  let starts = 0;
  const supervised = await superviseStageThread(() => {
    starts++;
    return starts === 1 ? Promise.resolve(first) : new Promise<StageThread>((resolve) => { startSecond = resolve; });
  }, quiet);
  first.end(new Error('worker ended'));
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  await supervised.stopping();
  const second = fakeThread('second', calls);
  startSecond(second);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(calls).toEqual(['first.stopping', 'second.stopping']);
  await supervised.stop();
  expect(calls).toEqual(['first.stopping', 'second.stopping', 'second.stop']);
});

test('without a stop, a successor is not told to stop', async () => {
  const calls: string[] = [];
  const first = fakeThread('first', calls);
  const second = fakeThread('second', calls);
  let starts = 0;
  const supervised = await superviseStageThread(() => Promise.resolve(++starts === 1 ? first : second), quiet);
  first.end(new Error('worker ended'));
  await new Promise((resolve) => setTimeout(resolve, 1_200));
  expect(starts).toBe(2);
  expect(calls).toEqual([]);
  await supervised.stop();
  expect(calls).toEqual(['second.stop']);
});
