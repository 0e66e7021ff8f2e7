import { createInflate } from 'node:zlib';
import { OID } from './algorithms';
import { child, isContext, octets, oidOf, parseDer } from './der';
import { As2Fault } from './faults';
import { MIME_LIMITS, parseEntity, type MimeEntity } from './mime';
import type { HeldShare } from '../held-bytes';
import { takeRoom } from './room';

/**
 * RFC 5402 compressed data (CMS CompressedData, zlib) → the inner MIME entity.
 *
 * Inflation draws on ONE budget per message, shared by every compressed layer (unwrap.ts sets it to the
 * smaller of MAX_INFLATED_BYTES and the receiver cap): a zlib bomb is a decompression failure, not an
 * out-of-memory. It streams through zlib's thread pool, so the event loop is never blocked by it, and
 * stops as soon as the budget is spent. `check` sees the first bytes (the inner entity's headers) and
 * may refuse the rest before it is inflated (a pinned trigger refuses an inner entity that cannot lead
 * to a signature without inflating it whole).
 */
export interface InflateBudget {
  /** Bytes that may still be inflated for this message. */
  left: number;
  /** The whole budget, for the words of the fault. */
  readonly total: number;
  /**
   * The message's share of the memory budget of all requests together (MAX_HELD_BODY_BYTES), which
   * inflated bytes take room in too: the per-message bound alone let sixty 64 KB messages hold 4 GB at
   * once. Past it the message is `not-accepted` (the partner sends it again). Whoever made the budget
   * releases it. The decoder, which opens one message at a time, passes a share of no budget.
   */
  readonly held: HeldShare;
}

export type HeadCheck = (head: Buffer) => As2Fault | null;

/** Enough inflated bytes to hold the inner entity's headers (MIME_LIMITS.maxHeaderBytes). */
const HEAD_BYTES = MIME_LIMITS.maxHeaderBytes + 4;

export async function decompressEntity(der: Buffer, budget: InflateBudget, check?: HeadCheck): Promise<MimeEntity> {
  let compressed: Buffer;
  try {
    const root = parseDer(der);
    if (oidOf(root.children[0]) !== OID.compressedData) throw new Error('not compressed data');
    const cd = child(child(root, 1, 'content'), 0, 'CompressedData');
    if (oidOf(child(child(cd, 1, 'compressionAlgorithm'), 0, 'algorithm')) !== OID.zlib) throw new Error('not zlib');
    const encap = child(cd, 2, 'encapContentInfo');
    const content = encap.children.find((n) => isContext(n, 0));
    if (!content) throw new Error('no content');
    compressed = octets(child(content, 0, 'compressed octets'));
  } catch {
    throw new As2Fault('decompression-failed', 'the compressed data is malformed or not zlib');
  }
  const inflated = await inflateBounded(compressed, budget, check);
  try {
    return parseEntity(inflated);
  } catch {
    throw new As2Fault('decompression-failed', 'the decompressed data is not a MIME entity');
  }
}

function inflateBounded(data: Buffer, budget: InflateBudget, check?: HeadCheck): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const inflater = createInflate();
    const chunks: Buffer[] = [];
    let size = 0;
    let checked = !check;
    let done = false;
    const fail = (fault: As2Fault) => {
      if (done) return;
      done = true;
      inflater.destroy();
      reject(fault);
    };
    const runCheck = () => {
      checked = true;
      const fault = check!(Buffer.concat(chunks));
      if (fault) fail(fault);
    };
    inflater.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > budget.left) return fail(new As2Fault('decompression-failed', `the compressed data inflates beyond ${budget.total} bytes`));
      try {
        takeRoom(budget.held, chunk.length);
      } catch (refused) {
        return fail(refused as As2Fault);
      }
      chunks.push(chunk);
      if (!checked && size >= HEAD_BYTES) runCheck();
    });
    inflater.on('error', () => fail(new As2Fault('decompression-failed', 'the compressed data is corrupt')));
    inflater.on('end', () => {
      if (done) return;
      // zlib stops at the end of its stream and drops what follows (a second stream, damage) without a word.
      if (inflater.bytesWritten !== data.length) return fail(new As2Fault('decompression-failed', 'the compressed data has bytes after the end of its zlib stream'));
      if (!checked) runCheck();
      if (done) return;
      done = true;
      budget.left -= size;
      resolve(Buffer.concat(chunks, size));
    });
    inflater.end(data);
  });
}
