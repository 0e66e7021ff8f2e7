import { crc32 } from 'node:zlib';
import { checkFrame, FRAME_HEADER_BYTES, FRAME_MAGIC, payloadShape } from './frame';

/**
 * Recovery's question when the newest segment holds a frame that fails its check at `pos`: is it the unfinished
 * write of a crash, which nothing acknowledged, or damage with acknowledged frames after it?
 *
 * A crash leaves a prefix of its one write (the frames of the appends it carried), and after an OS crash perhaps
 * pages of it missing (zeros) too. So the bytes from the first bad frame to the end belong to that write, and
 * most of them are inside frames: records' values, where a partner's body may hold anything, frames included
 * (the nine bytes `E7 00000000 00000000` alone check as a frame with an empty payload). Bytes inside a frame are
 * therefore never evidence. While a bad frame's header still says where it ends (its magic byte, and a payload
 * whose own fields fit the length it gives, cut short or not), the search skips to that end: a whole frame there
 * is evidence, another such frame is skipped too, and past the end of the segment there is nothing. A frame
 * whose payload is whole under its checksum but ends elsewhere than its length says (a flipped bit in the length)
 * is evidence itself. Only where a header says nothing (zeros, a bad block, a damaged magic byte or payload
 * layout) is every frame marker after it looked at.
 *
 * A whole frame is one whose checksum holds, longer than a header (the journal's rule for a frame, checkWholeFrame):
 * the only such frame a crash leaves is an empty one, so any longer one was written whole and acknowledged, whatever
 * its payload holds; a newer build's (another payload version) behind damage is no less acknowledged than this one's.
 * That its payload need not parse does not let a partner's bytes pass for evidence where they did not before: inside
 * a frame whose header says where it ends nothing is looked at, and past a header that says nothing a planted frame
 * could always count (a partner's body can hold a frame this version parses as easily as any other).
 *
 * A whole frame where one should start is taken for acknowledged, although an OS crash can leave later frames of
 * its own write whole behind a hole: the two cannot be told apart, and refusing costs an operator's look, while
 * cutting could drop what was acknowledged. The converse cannot be told either: damage in the last acknowledged
 * frame, with nothing whole after it, looks like an unfinished write and is cut, which drops that one append (the
 * warning says it may have).
 */
export interface AcknowledgedAfter {
  /** Where the acknowledged frame starts, relative to the buffer. */
  at: number;
  /** What was found there, for the error message. */
  what: string;
}

export function acknowledgedAfter(buf: Buffer, pos: number): AcknowledgedAfter | null {
  let at = pos;
  while (at < buf.length) {
    if (at > pos && wholeFrame(buf, at)) return { at, what: 'complete frames' };
    if (buf.length - at < FRAME_HEADER_BYTES) return null; // a header cut short ends the segment
    if (buf.readUInt8(at) !== FRAME_MAGIC) break;
    const end = at + FRAME_HEADER_BYTES + buf.readUInt32BE(at + 1);
    const shape = payloadShape(buf, at + FRAME_HEADER_BYTES, end);
    if (shape.kind === 'malformed') {
      // A flipped bit in the length: the payload's own fields end elsewhere, and its checksum holds there.
      const own = payloadShape(buf, at + FRAME_HEADER_BYTES);
      if (own.kind === 'complete' && crc32(buf.subarray(at + FRAME_HEADER_BYTES, own.end)) === buf.readUInt32BE(at + 5)) {
        return { at, what: 'a complete frame whose length field is damaged' };
      }
      break;
    }
    at = end; // the bytes up to its end are its own, whatever they look like
  }
  if (at >= buf.length) return null;
  // A header that says nothing: where the next frame starts is unknown, so any whole frame after it counts.
  for (let marker = buf.indexOf(FRAME_MAGIC, at + 1); marker >= 0; marker = buf.indexOf(FRAME_MAGIC, marker + 1)) {
    if (wholeFrame(buf, marker)) return { at: marker, what: 'complete frames' };
  }
  return null;
}

/** A frame whose checksum holds, never an empty one (above). */
function wholeFrame(buf: Buffer, at: number): boolean {
  const check = checkFrame(buf, at);
  return check.ok && check.length > FRAME_HEADER_BYTES;
}
