import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { createInflater, EncodingError, type Encoding } from '../../services/triggers/webhook/content-encoding';

/** Inflate `chunks` through createInflater into a sink that takes `delayMs` per chunk; the bytes that came out. */
async function inflate(encoding: Encoding, chunks: Buffer[], delayMs = 0, maxBytes = 64 * 1024 * 1024): Promise<Buffer> {
  const out: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, cb) {
      out.push(chunk);
      if (delayMs > 0) setTimeout(cb, delayMs); else cb();
    },
  });
  await pipeline(Readable.from(chunks), createInflater(encoding, maxBytes), sink);
  return Buffer.concat(out);
}

const text = Buffer.from(Array.from({ length: 40_000 }, (_, i) => `line ${i} of a body that compresses well\n`).join(''));

test('a consumer slower than the inflater gets the whole body (the held-back write is released)', async () => {
  const gz = gzipSync(text);
  const chunks = Array.from({ length: Math.ceil(gz.length / 16_384) }, (_, i) => gz.subarray(i * 16_384, (i + 1) * 16_384));
  expect((await inflate('gzip', chunks, 1)).equals(text)).toBe(true);
}, 30_000);

test('deflate is told zlib from raw by its first two bytes, however the body is split', async () => {
  for (const [name, body] of [['zlib', deflateSync(text)], ['raw', deflateRawSync(text)]] as const) {
    for (const split of [1, 2, 3]) {
      const chunks = [body.subarray(0, 1), body.subarray(1, split), body.subarray(split)].filter((c) => c.length > 0);
      expect({ name, split, same: (await inflate('deflate', chunks)).equals(text) }).toEqual({ name, split, same: true });
    }
  }
  await expect(inflate('deflate', [Buffer.from([0x78])])).rejects.toThrow(new EncodingError('the deflate body is cut short', 'corrupt'));
  await expect(inflate('deflate', [])).rejects.toThrow('the deflate body is empty');
});

test('inflation past the bound fails with too-large', async () => {
  await expect(inflate('gzip', [gzipSync(text)], 0, 1000)).rejects.toMatchObject({ kind: 'too-large' });
});
