import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Decipheriv, Hash } from 'node:crypto';

/**
 * Large synchronous passes over a message, cut into slices with a turn of the event loop between them. Node
 * offers no asynchronous cipher (only zlib and a few key functions run in the libuv pool), and a 40 MB message
 * six layers deep held the loop for most of a second: every other request waited on it.
 */

/** What one update() takes at most before the loop turns: a millisecond or a few of AES or SHA-2. */
export const SLICE_BYTES = 1024 * 1024;

/**
 * `pieces` (the encrypted content as it lies in the message, a BER string's pieces not joined first) through
 * `decipher`, and final(). The output goes into one buffer of the content's length (unpadded CBC and GCM give
 * no more than they take), so nothing is held twice. Throws what final() throws (a wrong GCM tag) before any
 * byte is returned.
 */
export async function decipherInSlices(decipher: Decipheriv, pieces: readonly Buffer[]): Promise<Buffer> {
  const total = pieces.reduce((n, piece) => n + piece.length, 0);
  const out = Buffer.allocUnsafe(total);
  let written = 0;
  const put = (bytes: Buffer) => {
    if (written + bytes.length > total) throw new Error('the cipher gave more bytes than it took');
    written += bytes.copy(out, written);
  };
  let sliced = 0;
  for (const piece of pieces) {
    for (let at = 0; at < piece.length; at += SLICE_BYTES) {
      put(decipher.update(piece.subarray(at, at + SLICE_BYTES)));
      sliced += Math.min(SLICE_BYTES, piece.length - at);
      if (sliced >= SLICE_BYTES) { sliced = 0; await nextTurn(); }
    }
  }
  put(decipher.final());
  return out.subarray(0, written);
}

/** `content` into `hash`, a slice at a time, with a turn of the loop between slices. */
export async function hashInSlices(hash: Hash, content: Buffer): Promise<Hash> {
  for (let at = 0; at < content.length; at += SLICE_BYTES) {
    if (at > 0) await nextTurn();
    hash.update(content.subarray(at, at + SLICE_BYTES));
  }
  return hash;
}
