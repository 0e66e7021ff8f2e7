/**
 * A multipart part's Content-Transfer-Encoding (RFC 2045 §6), undone as the part streams. RFC 7578 §4.7
 * deprecates it in form-data, but mail-derived senders (some .NET and Java clients) still write base64 or
 * quoted-printable parts; read as sent, their files would be stored as the encoded text.
 *
 * Synchronous and chunk by chunk, with a few bytes carried between chunks: the receiver's scan and the
 * decoder run the same code, so they agree on what is malformed and on the decoded size, and neither
 * holds a part.
 */
export interface PartDecoder {
  /** The decoded bytes of `chunk`; throws TransferEncodingError. */
  write(chunk: Buffer): Buffer;
  /** What the last chunk left undecoded; throws TransferEncodingError. */
  end(): Buffer;
}

export class TransferEncodingError extends Error {
  constructor(readonly detail: string) {
    super(detail);
    this.name = 'TransferEncodingError';
  }
}

/** The encodings that leave the bytes as they are (RFC 2045 §6.1); absent counts as 7bit. */
const IDENTITY = new Set(['7bit', '8bit', 'binary']);

/**
 * A decoder for `encoding` (busboy's lower-cased header value, 7bit when absent), null when the bytes are
 * kept as sent; TransferEncodingError for a value that is neither (x-token encodings included: nothing
 * here can undo them).
 */
export function partDecoder(encoding: string): PartDecoder | null {
  const name = encoding.trim().toLowerCase();
  if (IDENTITY.has(name)) return null;
  if (name === 'base64') return base64Decoder();
  if (name === 'quoted-printable') return quotedPrintableDecoder();
  throw new TransferEncodingError('a part has a Content-Transfer-Encoding other than base64, quoted-printable, 7bit, 8bit or binary');
}

/** Base64 alphabet values; -1 for whitespace (line breaks, and what a transport may pad with), -2 for the rest. */
const BASE64 = new Int8Array(256).fill(-2);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'].entries()) BASE64[c.charCodeAt(0)] = i;
for (const c of ' \t\r\n') BASE64[c.charCodeAt(0)] = -1;
const PAD = 0x3d;

/**
 * RFC 2045 §6.8. Whitespace and line breaks anywhere are skipped; any other byte outside the alphabet is
 * malformed (§6.8 lets a decoder ignore them, but here they mean the part is not base64 at all, and a file
 * silently decoded from half of it would be wrong; Node's own decoder skips them, which is why this one is written
 * here). `=` only ends the data; a lone trailing character (6 bits) cannot be a byte. Missing padding is accepted,
 * as Node's own decoder does.
 */
function base64Decoder(): PartDecoder {
  const quantum = new Uint8Array(4);
  let held = 0;
  let pads = 0;
  const malformed = () => new TransferEncodingError('a base64 part holds characters outside the base64 alphabet');
  return {
    write(chunk) {
      const out = Buffer.allocUnsafe(Math.ceil(chunk.length / 4) * 3 + 3);
      let n = 0;
      for (const byte of chunk) {
        const value = BASE64[byte];
        if (value === -1) continue;
        if (byte === PAD) {
          // Two sextets held end in `==`, three in `=`: padding anywhere else, or more of it, is not base64.
          if (held < 2 || pads >= 4 - held) throw new TransferEncodingError('a base64 part has padding (=) where no quantum ends');
          pads++;
          continue;
        }
        if (value === -2 || pads > 0) throw value === -2 ? malformed() : new TransferEncodingError('a base64 part has data after its padding');
        quantum[held++] = value;
        if (held === 4) {
          out[n++] = (quantum[0] << 2) | (quantum[1] >> 4);
          out[n++] = ((quantum[1] & 15) << 4) | (quantum[2] >> 2);
          out[n++] = ((quantum[2] & 3) << 6) | quantum[3];
          held = 0;
        }
      }
      return out.subarray(0, n);
    },
    end() {
      if (held === 1) throw new TransferEncodingError('a base64 part ends in the middle of a byte');
      const rest = held >= 2 ? [(quantum[0] << 2) | (quantum[1] >> 4)] : [];
      if (held === 3) rest.push(((quantum[1] & 15) << 4) | (quantum[2] >> 2));
      held = 0;
      return Buffer.from(rest);
    },
  };
}

/** The longest line RFC 5322 allows: padding after a soft break's `=` is looked through up to this. */
const MAX_LINE = 998;

const hex = (byte: number) => (byte >= 0x30 && byte <= 0x39 ? byte - 0x30 : byte >= 0x41 && byte <= 0x46 ? byte - 0x37 : byte >= 0x61 && byte <= 0x66 ? byte - 0x57 : -1);

/**
 * RFC 2045 §6.7: `=XX` is a byte, `=` at a line end (CRLF, or a bare LF) a soft line break, spaces and tabs
 * between the two included (transport padding, rule 5). An `=` followed by anything else is kept as it is, as §6.7
 * (note 1) advises, rather than refused. Other trailing whitespace is kept: its deletion (rule 3) is for mail
 * gateways that pad lines, which HTTP has not, and encoders write a meaningful trailing space as `=20`. What follows
 * an `=` is carried to the next chunk until it decides: two bytes, or a run of padding up to a line's length (998,
 * RFC 5322), past which the `=` is kept as it is.
 */
function quotedPrintableDecoder(): PartDecoder {
  let carry = Buffer.alloc(0);
  const decode = (bytes: Buffer, final: boolean): Buffer => {
    const out = Buffer.allocUnsafe(bytes.length);
    let n = 0;
    let i = 0;
    for (; i < bytes.length; i++) {
      const byte = bytes[i];
      if (byte !== PAD) { out[n++] = byte; continue; }
      let blank = i + 1;
      while (blank < bytes.length && blank - i <= MAX_LINE && (bytes[blank] === 0x20 || bytes[blank] === 0x09)) blank++;
      if (!final && blank + 1 >= bytes.length && blank - i <= MAX_LINE) break;
      if (bytes[blank] === 0x0a) { i = blank; continue; }
      if (bytes[blank] === 0x0d && bytes[blank + 1] === 0x0a) { i = blank + 1; continue; }
      const a = bytes[i + 1];
      const b = bytes[i + 2];
      const high = a === undefined ? -1 : hex(a);
      const low = b === undefined ? -1 : hex(b);
      if (high >= 0 && low >= 0) { out[n++] = (high << 4) | low; i += 2; continue; }
      out[n++] = byte;
    }
    carry = Buffer.from(bytes.subarray(i));
    return out.subarray(0, n);
  };
  return {
    write: (chunk) => decode(carry.length ? Buffer.concat([carry, chunk]) : chunk, false),
    end: () => decode(carry, true),
  };
}
