import { partDecoder, TransferEncodingError, type PartDecoder } from '../../services/triggers/webhook/transfer-encoding';

/** Decodes `text` fed in chunks of `size` bytes, as a part arrives. */
function decode(decoder: PartDecoder, text: string, size: number): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(Buffer.from(decoder.write(bytes.subarray(at, at + size))));
  out.push(decoder.end());
  return Buffer.concat(out);
}

describe('a part\'s Content-Transfer-Encoding', () => {
  test('7bit, 8bit, binary (any case, padded) keep the bytes; any other value is refused in words of our own', () => {
    for (const identity of ['7bit', '8BIT', ' binary ']) expect(partDecoder(identity)).toBeNull();
    for (const other of ['x-uuencode', 'gzip', '']) {
      expect(() => partDecoder(other)).toThrow(new TransferEncodingError('a part has a Content-Transfer-Encoding other than base64, quoted-printable, 7bit, 8bit or binary'));
    }
  });

  test('base64 decodes across any chunk seam, line breaks and padding included', () => {
    const data = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 37) % 256));
    const wrapped = data.toString('base64').replace(/.{76}/g, '$&\r\n');
    for (const size of [1, 2, 3, 5, 77, 4096]) expect(decode(partDecoder('BASE64')!, wrapped, size).equals(data)).toBe(true);
    for (const tail of ['a', 'ab', 'abc']) {
      expect(decode(partDecoder('base64')!, Buffer.from(tail).toString('base64'), 1).toString()).toBe(tail);
      expect(decode(partDecoder('base64')!, Buffer.from(tail).toString('base64').replace(/=+$/, ''), 2).toString()).toBe(tail);
    }
  });

  test('malformed base64 is refused precisely', () => {
    const refusal = (text: string) => { try { decode(partDecoder('base64')!, text, 3); return null; } catch (error) { return (error as TransferEncodingError).detail; } };
    expect(refusal('aGVs*bG8=')).toBe('a base64 part holds characters outside the base64 alphabet');
    expect(refusal('aGVsbG8=\r\n-- signature')).toBe('a base64 part holds characters outside the base64 alphabet');
    expect(refusal('aGVsbG8=aGVsbG8=')).toBe('a base64 part has data after its padding');
    expect(refusal('aGVsb')).toBe('a base64 part ends in the middle of a byte');
    // Padding only where a quantum of two or three characters ends, and only as much as it lacks.
    for (const misplaced of ['=', 'QUJD=', 'QQ===', 'QUI==', 'Q=Q=']) expect({ misplaced, detail: refusal(misplaced) }).toEqual({ misplaced, detail: 'a base64 part has padding (=) where no quantum ends' });
    for (const [padded, text] of [['QQ==', 'A'], ['QUI=', 'AB'], ['QQ=\r\n=', 'A']]) expect(decode(partDecoder('base64')!, padded, 1).toString()).toBe(text);
  });

  test('quoted-printable: escapes, soft line breaks (CRLF or LF) across chunk seams; a stray = is kept', () => {
    const text = 'K=C3=B6ln =\r\nist =\nsch=C3=B6n=20\r\na=b =XY end=';
    const expected = Buffer.concat([Buffer.from('Köln ist schön \r\na=b =XY end=')]);
    for (const size of [1, 2, 3, 7, 100]) expect(decode(partDecoder('Quoted-Printable')!, text, size).equals(expected)).toBe(true);
    // Transport padding between a soft break's = and its line end (RFC 2045 §6.7 rule 5); too long a run, or one
    // not ending the line, keeps the = as it is.
    const padded = `a= \t \r\nb=  \nc= d=${' '.repeat(1200)}\r\ne`;
    const out = `abc= d=${' '.repeat(1200)}\r\ne`;
    for (const size of [1, 2, 5, 64, 2000]) expect({ size, out: decode(partDecoder('quoted-printable')!, padded, size).toString('latin1') }).toEqual({ size, out });
  });
});
