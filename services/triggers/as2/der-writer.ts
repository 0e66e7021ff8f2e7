/** The few DER encodings the MDN signature needs. */
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
/**
 * Encoded once per OID: the service encodes only its own constant OIDs, a few dozen, and each MDN signature
 * needs several (BigInt arithmetic was ~6% of an AS2 receiver's main thread). Callers copy it (tlv concatenates).
 */
const encodedOids = new Map<string, Buffer>();
const MAX_ENCODED_OIDS = 256;
export function oid(id: string): Buffer {
  let encoded = encodedOids.get(id);
  if (!encoded) {
    encoded = tlv(0x06, oidContent(id));
    if (encodedOids.size < MAX_ENCODED_OIDS) encodedOids.set(id, encoded);
  }
  return encoded;
}

/**
 * The content octets of an OBJECT IDENTIFIER (X.690 §8.19): the first two arcs as 40·a + b, then every arc
 * in base 128, high bit set on all but each arc's last octet. Only this service's constant OIDs are
 * encoded (test/unit/der-writer.test.ts checks them, and edge cases, against node-forge).
 */
export function oidContent(id: string): Buffer {
  if (!/^[0-2](?:\.(?:0|[1-9]\d*))+$/.test(id)) throw new Error(`not an object identifier: ${id}`);
  const arcs = id.split('.').map(BigInt);
  if (arcs[0] < 2n && arcs[1] > 39n) throw new Error(`not an object identifier: ${id}`);
  const bytes: number[] = [];
  for (const arc of [arcs[0] * 40n + arcs[1], ...arcs.slice(2)]) {
    const base128: number[] = [Number(arc & 0x7fn)];
    for (let v = arc >> 7n; v > 0n; v >>= 7n) base128.unshift(Number(v & 0x7fn) | 0x80);
    bytes.push(...base128);
  }
  return Buffer.from(bytes);
}
export const octetString = (b: Buffer) => tlv(0x04, b);
export const integer = (n: number) => tlv(0x02, Buffer.from([n]));
export const NULL = Buffer.from([0x05, 0x00]);
export const algorithmId = (id: string, params?: Buffer) => seq(oid(id), ...(params ? [params] : []));
export function utcTime(date: Date): Buffer {
  const s = date.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z';
  return tlv(0x17, Buffer.from(s, 'ascii'));
}
