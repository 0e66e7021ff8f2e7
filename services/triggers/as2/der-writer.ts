import * as forge from 'node-forge';

/** The few DER encodings the MDN signature needs (node-forge encodes object identifiers). */
export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const n = body.length;
  const length = n < 0x80 ? Buffer.from([n]) : lengthBytes(n);
  return Buffer.concat([Buffer.from([tag]), length, body]);
}

function lengthBytes(n: number): Buffer {
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export const seq = (...c: Buffer[]) => tlv(0x30, ...c);
/** A SET OF in DER order: elements sorted by their encodings (X.690 §11.6), as verifiers re-encode it. */
export const setOf = (...c: Buffer[]) => tlv(0x31, ...[...c].sort(Buffer.compare));
export const oid = (id: string) => tlv(0x06, Buffer.from(forge.asn1.oidToDer(id).getBytes(), 'binary'));
export const octetString = (b: Buffer) => tlv(0x04, b);
export const integer = (n: number) => tlv(0x02, Buffer.from([n]));
export const NULL = Buffer.from([0x05, 0x00]);
export const algorithmId = (id: string, params?: Buffer) => seq(oid(id), ...(params ? [params] : []));
export function utcTime(date: Date): Buffer {
  const s = date.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z';
  return tlv(0x17, Buffer.from(s, 'ascii'));
}
