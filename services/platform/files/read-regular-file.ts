import { constants, promises as fsp } from 'node:fs';

/**
 * The text of a file expected to be a small regular one (a job's record, a checkpoint). Opened without blocking
 * and checked first: a named pipe in its place would otherwise block the read, and with it whatever waits for it
 * (`ingress start`), for ever; a device or a huge file would be read to its end. Those are refused with the reason.
 */
export async function readRegularFile(file: string, maxBytes: number): Promise<string> {
  const handle = await fsp.open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new Error(`not a regular file (${stat.isDirectory() ? 'a directory' : stat.isFIFO() ? 'a named pipe' : 'a device or socket'})`);
    if (stat.size > maxBytes) throw new Error(`${stat.size} bytes, more than the ${maxBytes} such a file holds`);
    // Into a buffer one byte larger than its stat said: one that grew since (these files are replaced whole, by a
    // rename, never appended to) is refused rather than read on past its bound.
    const buffer = Buffer.alloc(stat.size + 1);
    let length = 0;
    for (let bytesRead = -1; bytesRead !== 0 && length < buffer.length; length += bytesRead) {
      ({ bytesRead } = await handle.read(buffer, length, buffer.length - length, length));
    }
    if (length > stat.size) throw new Error('it grew while it was read');
    return buffer.toString('utf8', 0, length);
  } finally {
    await handle.close();
  }
}
