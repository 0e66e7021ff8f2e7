import { MessageChannel } from 'node:worker_threads';
import { rpcOver, type Rpc } from '../../services/platform/threads/rpc';

/** Both ends of an rpc over one MessageChannel, as a worker and its parent use it. */
function pair(handlers: Parameters<typeof rpcOver>[1]) {
  const channel = new MessageChannel();
  const server = rpcOver(channel.port1, handlers);
  const client = rpcOver(channel.port2, {});
  return { server, client, close: () => { server.close(new Error('closed')); client.close(new Error('closed')); channel.port1.close(); channel.port2.close(); } };
}

let unhandled: unknown[];
const onUnhandled = (reason: unknown) => { unhandled.push(reason); };
beforeEach(() => { unhandled = []; process.on('unhandledRejection', onUnhandled); });
afterEach(() => { process.off('unhandledRejection', onUnhandled); });
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

test('an answer that cannot be cloned rejects the call with the clone error; nothing is left unhandled', async () => {
  const { client, close } = pair({ fn: () => () => 'a function', ok: () => 'fine', failsOddly: () => { throw Object.assign(new Error('bad'), { code: () => 1 }); } });
  try {
    await expect(client.call('fn', [])).rejects.toMatchObject({ name: 'DataCloneError', message: expect.stringMatching(/^the answer to call \d+ could not be sent to the other thread: .*could not be cloned/) });
    // An error whose code is itself uncloneable: still an answer, not a hang.
    await expect(client.call('failsOddly', [])).rejects.toMatchObject({ name: 'DataCloneError' });
    // The channel still works afterwards.
    await expect(client.call('ok', [])).resolves.toBe('fine');
    await settle();
    expect(unhandled).toEqual([]);
  } finally {
    close();
  }
});

test('arguments that cannot be cloned reject the call at once, and later calls are answered', async () => {
  let called = 0;
  const { client, close } = pair({ echo: (x: unknown) => { called++; return x; } });
  try {
    await expect((client as Rpc).call('echo', [() => 1])).rejects.toMatchObject({ name: 'DataCloneError' });
    expect(called).toBe(0);
    await expect(client.call('echo', [2])).resolves.toBe(2);
    expect(called).toBe(1);
    await settle();
    expect(unhandled).toEqual([]);
  } finally {
    close();
  }
});

test('a call given withinMs gives up when no answer comes, and an answer that comes later is ignored', async () => {
  let answer: (value: string) => void = () => undefined;
  const { client, close } = pair({ slow: () => new Promise<string>((resolve) => { answer = resolve; }), quick: () => 'now' });
  try {
    await expect(client.call('slow', [], [], 20)).rejects.toThrow('slow: no answer from the other thread within 20 ms');
    answer('late');
    await settle();
    await expect(client.call('quick', [], [], 1000)).resolves.toBe('now');
    expect(unhandled).toEqual([]);
  } finally {
    close();
  }
});
