import { PassThrough, Readable } from 'node:stream';
import { watchedBody, type BodyWatch } from '../../services/platform/store/watched-body';

const watch: BodyWatch = {
  idleMs: 50,
  stalled: (bytes) => Object.assign(new Error(`stalled after ${bytes}`), { code: 'stalled' }),
  brokeOff: (error, bytes) => Object.assign(new Error(`broke off after ${bytes}: ${(error as Error).message}`), { code: 'broke-off' }),
};

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

test('passes every byte of a source that ends, and an empty one', async () => {
  expect((await readAll(watchedBody(Readable.from([Buffer.from('ab'), Buffer.from('cd')]), watch))).toString()).toBe('abcd');
  expect((await readAll(watchedBody(Readable.from([]), watch))).length).toBe(0);
});

test('a source that sends nothing more while the reader waits fails as stalled, with the bytes so far', async () => {
  const source = new PassThrough();
  source.write(Buffer.from('12345'));
  await expect(readAll(watchedBody(source, watch))).rejects.toMatchObject({ code: 'stalled', message: 'stalled after 5' });
  expect(source.destroyed).toBe(true);
});

test('a reader that does not ask is never failed, however long the source has nothing', async () => {
  const source = new PassThrough();
  const body = watchedBody(source, watch);
  let failed: unknown = null;
  body.on('error', (e) => { failed = e; });
  await new Promise((resolve) => setTimeout(resolve, 4 * watch.idleMs));
  source.end(Buffer.from('late'));
  expect((await readAll(body)).toString()).toBe('late');
  expect(failed).toBeNull();
});

test('a source that errors, or closes before its end without an error, is broken off', async () => {
  const erring = new PassThrough();
  erring.write(Buffer.from('abc'));
  setTimeout(() => erring.destroy(new Error('reset')), 10);
  await expect(readAll(watchedBody(erring, { ...watch, idleMs: 10_000 }))).rejects.toMatchObject({ code: 'broke-off', message: 'broke off after 3: reset' });

  const closing = new PassThrough();
  closing.write(Buffer.from('abcd'));
  setTimeout(() => closing.destroy(), 10);
  await expect(readAll(watchedBody(closing, { ...watch, idleMs: 10_000 }))).rejects.toMatchObject({ code: 'broke-off', message: 'broke off after 4: the stream closed before its end' });
});
