import { inflateSync } from 'node:zlib';
import { OID } from './algorithms';
import { child, isContext, octets, oidOf, parseDer } from './der';
import { As2Fault } from './faults';
import { parseEntity, type MimeEntity } from './mime';

/**
 * RFC 5402 compressed data (CMS CompressedData, zlib) → the inner MIME entity. Inflation stops at
 * MAX_INFLATED_BYTES: a zlib bomb is a decompression failure, not an out-of-memory.
 */
export function decompressEntity(der: Buffer, maxInflatedBytes: number): MimeEntity {
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
  let inflated: Buffer;
  try {
    inflated = inflateSync(compressed, { maxOutputLength: maxInflatedBytes });
  } catch (error) {
    const tooLarge = (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError;
    throw new As2Fault('decompression-failed', tooLarge ? `the compressed data inflates beyond ${maxInflatedBytes} bytes` : 'the compressed data is corrupt');
  }
  try {
    return parseEntity(inflated);
  } catch {
    throw new As2Fault('decompression-failed', 'the decompressed data is not a MIME entity');
  }
}
