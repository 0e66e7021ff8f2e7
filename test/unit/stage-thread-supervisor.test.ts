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

/** Until `done` holds, looked at every 10 ms (the restart delay is a timer, which a busy machine fires late). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** A supervised thread that ended, and whose successor is being started: `startSecond` lets the start finish. */
async function successorStarting(calls: string[]) {
  const first = fakeThread('first', calls);
  let startSecond: (thread: StageThread) => void = () => undefined;
  let starts = 0;
  const supervised = await superviseStageThread(() => {
    starts++;
    return starts === 1 ? Promise.resolve(first) : new Promise<StageThread>((resolve) => { startSecond = resolve; });
  }, quiet);
  first.end(new Error('worker ended'));
  await until(() => starts === 2); // after the restart delay (1 s)
  return { supervised, startSecond: (thread: StageThread) => startSecond(thread) };
}

test('a stop asked for while a successor starts reaches the successor too, before its stop', async () => {
  const calls: string[] = [];
  const { supervised, startSecond } = await successorStarting(calls);
  const told = supervised.stopping();
  const stopped = supervised.stop();
  startSecond(fakeThread('second', calls));
  await Promise.all([told, stopped]);
  // The ended one is stopped last, as before: on a worker that has exited that only releases this thread's side.
  expect(calls).toEqual(['first.stopping', 'second.stopping', 'second.stop', 'first.stop']);
});

test('a successor that comes up after stopping() was called, before stop(), is told at once', async () => {
  const calls: string[] = [];
  const { supervised, startSecond } = await successorStarting(calls);
  await supervised.stopping();
  startSecond(fakeThread('second', calls));
  await until(() => calls.length === 2);
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
  await until(() => starts === 2);
  await new Promise((resolve) => setTimeout(resolve, 20)); // what a successor that was told would have heard by now
  expect(calls).toEqual([]);
  await supervised.stop();
  expect(calls).toEqual(['second.stop']);
});
