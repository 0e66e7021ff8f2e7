import { crc32 } from 'node:zlib';
import { frameSize, payloadShape, writeFrame, type JournalEntry } from '../../services/platform/log/embedded/frame';
import { acknowledgedAfter } from '../../services/platform/log/embedded/torn-tail';

/** Journal recovery on byte patterns an OS crash leaves, which a real file test cannot make the kernel produce. */
const frameOf = (entry: JournalEntry): Buffer => {
  const buf = Buffer.alloc(frameSize(entry));
  writeFrame(entry, buf, 0, buf.length);
  return buf;
};
const entry = (value: Buffer): JournalEntry => ({ records: [{ topic: 't', key: 'k', value, headers: { h: 'v' }, timestamp: 1 }], commits: [{ group: 'g', topic: 't', next: 3 }] });
const planted = frameOf(entry(Buffer.from('planted')));
const emptyFrame = Buffer.from([0xe7, 0, 0, 0, 0, 0, 0, 0, 0]);

test('a payload\'s shape: complete where its own fields end, truncated when cut short, malformed against a length it does not fit', () => {
  const frame = frameOf(entry(Buffer.alloc(100, 1)));
  expect(payloadShape(frame, 9)).toEqual({ kind: 'complete', end: frame.length });
  expect(payloadShape(frame, 9, frame.length)).toEqual({ kind: 'complete', end: frame.length });
  expect(payloadShape(frame.subarray(0, 60), 9, frame.length)).toEqual({ kind: 'truncated' });
  expect(payloadShape(frame, 9, frame.length + 16)).toEqual({ kind: 'malformed' }); // ends before its length
  expect(payloadShape(frame, 9, frame.length - 16)).toEqual({ kind: 'malformed' }); // passes it
  expect(payloadShape(emptyFrame, 9, 9)).toEqual({ kind: 'malformed' });
});

test('a torn frame with a page of zeros in its value, and frames planted in it, is an unfinished write', () => {
  const value = Buffer.concat([Buffer.alloc(9000, 0x41), planted, emptyFrame, Buffer.alloc(9000, 0x42)]);
  const torn = frameOf(entry(value)).subarray(0, 14_000); // cut short
  torn.fill(0, 4096, 8192); // a page the crash never wrote, before the planted frames
  const segment = Buffer.concat([planted, torn]);
  expect(segment.indexOf(planted, planted.length)).toBeGreaterThan(planted.length + 8192);
  expect(acknowledgedAfter(segment, planted.length)).toBeNull();
});

test('after a header lost to zeros, an empty frame is no evidence; a whole frame is', () => {
  const torn = frameOf(entry(Buffer.concat([Buffer.alloc(5000, 0x41), emptyFrame, Buffer.alloc(9000, 0x42)]))).subarray(0, 8000);
  torn.fill(0, 0, 4096);
  expect(acknowledgedAfter(torn, 0)).toBeNull();
  const damaged = Buffer.concat([Buffer.alloc(4096), planted]);
  expect(acknowledgedAfter(damaged, 0)).toEqual({ at: 4096, what: 'complete frames' });
});

test('a whole frame of a newer build (another payload version, its checksum holding) is evidence like any whole frame', () => {
  const newer = frameOf(entry(Buffer.from('newer')));
  newer[9] = 2; // the payload's version
  newer.writeUInt32BE(crc32(newer.subarray(9)), 5);
  const damaged = frameOf(entry(Buffer.from('damaged')));
  damaged[damaged.length - 12] ^= 0x10;
  expect(acknowledgedAfter(Buffer.concat([damaged, newer]), 0)).toEqual({ at: damaged.length, what: 'complete frames' });
  expect(acknowledgedAfter(Buffer.concat([Buffer.alloc(4096), newer]), 0)).toEqual({ at: 4096, what: 'complete frames' });
});
