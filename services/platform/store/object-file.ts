import type { FileHandle } from 'node:fs/promises';

/**
 * The file of one object in the filesystem store (filesystem-store.ts): a header saying what the object is,
 * then its content, so that what describes an object and its bytes are put in place by one rename.
 *
 *   bytes 0–15   `ingress-object`, 0, 1: what the file is, and the version of this layout
 *   16–47        the SHA-256 of the content
 *   48–55        the content's size, unsigned 64-bit big-endian
 *   56–59        the content type's length in bytes, unsigned 32-bit big-endian; 0xffffffff: none
 *   60–          the content type, UTF-8
 *   then         the content
 *
 * Fixed widths: a put knows the header's length before the content arrives (the content type is given with
 * the put), writes the content after it, and fills in size and hash once the content is whole.
 */
const MAGIC = Buffer.from('ingress-object\u0000\u0001', 'latin1');
const FIXED = 60;
const NO_TYPE = 0xffffffff;
/** Read with the fixed part: any content type up to this long takes no second read. */
const FIRST_READ = FIXED + 1024;

export interface ObjectHeader {
  size: number;
  sha256: string;
  contentType: string | null;
}

/** Where the content starts in the file of an object of this content type. */
export function headerLength(contentType: string | null): number {
  return FIXED + (contentType === null ? 0 : Buffer.byteLength(contentType, 'utf8'));
}

export async function writeHeader(handle: FileHandle, object: ObjectHeader): Promise<void> {
  const type = object.contentType === null ? null : Buffer.from(object.contentType, 'utf8');
  const header = Buffer.alloc(headerLength(object.contentType));
  MAGIC.copy(header, 0);
  Buffer.from(object.sha256, 'hex').copy(header, 16);
  header.writeBigUInt64BE(BigInt(object.size), 48);
  header.writeUInt32BE(type === null ? NO_TYPE : type.length, 56);
  type?.copy(header, FIXED);
  for (let at = 0; at < header.length;) at += (await handle.write(header, at, header.length - at, at)).bytesWritten;
}

/** The header, and where the content starts; throws when the file is not an object's (or its header is cut short). */
export async function parseHeader(handle: FileHandle): Promise<ObjectHeader & { contentStart: number }> {
  const first = Buffer.alloc(FIRST_READ);
  const { bytesRead } = await handle.read(first, 0, FIRST_READ, 0);
  if (bytesRead < FIXED || !first.subarray(0, MAGIC.length).equals(MAGIC)) throw new Error('not an object file of this store: its header is missing');
  const typeLength = first.readUInt32BE(56);
  let contentType: string | null = null;
  if (typeLength !== NO_TYPE) {
    let type = first.subarray(FIXED, FIXED + typeLength);
    if (type.length < typeLength) {
      // A long type: read the rest, once the file is known to hold it (a damaged length would ask for gigabytes).
      if (FIXED + typeLength > (await handle.stat()).size) throw new Error('not an object file of this store: its header is cut short');
      type = Buffer.alloc(typeLength);
      const read = await handle.read(type, 0, typeLength, FIXED);
      if (read.bytesRead < typeLength) throw new Error('not an object file of this store: its header is cut short');
    }
    contentType = type.toString('utf8');
  }
  return {
    sha256: first.subarray(16, 48).toString('hex'),
    size: Number(first.readBigUInt64BE(48)),
    contentType,
    contentStart: FIXED + (typeLength === NO_TYPE ? 0 : typeLength),
  };
}
