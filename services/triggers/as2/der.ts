import { As2Fault } from './faults';

/**
 * A bounded BER/DER reader that keeps byte offsets. CMS signatures are computed over the ORIGINAL
 * encoding of the signed attributes; an object model that re-encodes (node-forge's asn1) loses it for
 * senders that use BER (indefinite lengths, constructed strings), so CMS is walked on these nodes.
 */
export interface Node {
  /** Tag class (0 universal, 1 application, 2 context, 3 private) and number, low-tag-number form only. */
  cls: number;
  tag: number;
  constructed: boolean;
  /** Offsets into the buffer: start of the tag, start and end of the content. */
  start: number;
  contentStart: number;
  end: number;
  /** End of the whole encoding: `end`, or two bytes later for an indefinite length (end-of-contents). */
  outerEnd: number;
  children: Node[];
  buf: Buffer;
}

export const MAX_DEPTH = 32;
const MAX_NODES = 100_000;
export const MAX_OID_BYTES = 64;

export function parseDer(buf: Buffer): Node {
  const root = parseLeadingDer(buf);
  // One encoding is the whole value (X.690 §8.1.1): bytes after it are no part of what was signed or encrypted, and
  // no peer sends them (openssl, BouncyCastle, pyas2-lib); read past, they would ride along unchecked.
  if (root.outerEnd !== buf.length) throw bad(`${buf.length - root.outerEnd} bytes after its end`);
  return root;
}

/**
 * The encoding that starts `buf`, whatever follows it (`outerEnd` says where it ended). Only for a value read
 * the way its other readers read it (certificates.ts, a certificate's key identifier as OpenSSL takes it); CMS is
 * read with parseDer.
 */
export function parseLeadingDer(buf: Buffer): Node {
  let count = 0;
  const read = (at: number, limit: number, depth: number): Node => {
    if (depth > MAX_DEPTH) throw bad('nested too deeply');
    if (++count > MAX_NODES) throw bad('too many elements');
    if (at + 2 > limit) throw bad('truncated');
    const first = buf[at];
    const cls = first >> 6;
    const constructed = (first & 0x20) !== 0;
    let tag = first & 0x1f;
    let p = at + 1;
    if (tag === 0x1f) {
      tag = 0;
      for (let i = 0; ; i++) {
        if (p >= limit || i > 3) throw bad('bad tag');
        const b = buf[p++];
        tag = (tag << 7) | (b & 0x7f);
        if (!(b & 0x80)) break;
      }
    }
    if (p >= limit) throw bad('truncated');
    const lenByte = buf[p++];
    const children: Node[] = [];
    if (lenByte === 0x80) {
      if (!constructed) throw bad('indefinite length on a primitive');
      const contentStart = p;
      for (;;) {
        if (p + 2 > limit) throw bad('truncated');
        if (buf[p] === 0 && buf[p + 1] === 0) return { cls, tag, constructed, start: at, contentStart, end: p, outerEnd: p + 2, children, buf };
        const child = read(p, limit, depth + 1);
        children.push(child);
        p = child.outerEnd;
      }
    }
    let length = lenByte;
    if (lenByte & 0x80) {
      const n = lenByte & 0x7f;
      if (n > 4 || p + n > limit) throw bad('bad length');
      length = 0;
      for (let i = 0; i < n; i++) length = length * 256 + buf[p++];
    }
    const contentStart = p;
    const end = p + length;
    if (end > limit) throw bad('length beyond the data');
    if (constructed) {
      let q = contentStart;
      while (q < end) {
        const child = read(q, end, depth + 1);
        children.push(child);
        q = child.outerEnd;
      }
    }
    return { cls, tag, constructed, start: at, contentStart, end, outerEnd: end, children, buf };
  };
  return read(0, buf.length, 0);
}

/** The node's whole encoding, tag and length included, exactly as received. */
export function rawOf(node: Node): Buffer { return node.buf.subarray(node.start, node.outerEnd); }
export function contentOf(node: Node): Buffer { return node.buf.subarray(node.contentStart, node.end); }

/** An OCTET STRING's bytes, whether primitive or (BER) constructed of pieces. */
export function octets(node: Node): Buffer {
  if (!node.constructed) return contentOf(node);
  return Buffer.concat(octetPieces(node));
}

/** An OCTET STRING's pieces in order, not joined: for content too large to copy only to read it once. */
export function octetPieces(node: Node): Buffer[] {
  if (!node.constructed) return [contentOf(node)];
  return node.children.flatMap(octetPieces);
}

export function oidOf(node: Node | undefined): string {
  if (!node || node.cls !== 0 || node.tag !== 6) throw bad('expected an OBJECT IDENTIFIER');
  const bytes = contentOf(node);
  if (bytes.length === 0) throw bad('empty OBJECT IDENTIFIER');
  // Real OIDs are a few dozen bytes; an attacker-sized one would be copied (4x as text) into fault details.
  if (bytes.length > MAX_OID_BYTES) throw bad('OBJECT IDENTIFIER too long');
  // X.690 §8.19.2: each subidentifier ends in a byte below 0x80 and does not start with 0x80. Read loosely, a
  // cut one (`… 01 07 01 80`) or a padded one would name a real OID (id-data); arcs are BigInt (2.25.<UUID>).
  if (bytes[bytes.length - 1] & 0x80) throw bad('OBJECT IDENTIFIER ends inside a subidentifier');
  const parts: bigint[] = [];
  let value = 0n;
  for (let k = 0; k < bytes.length; k++) {
    if (bytes[k] === 0x80 && (k === 0 || !(bytes[k - 1] & 0x80))) throw bad('OBJECT IDENTIFIER subidentifier not minimally encoded');
    value = (value << 7n) | BigInt(bytes[k] & 0x7f);
    if (!(bytes[k] & 0x80)) { parts.push(value); value = 0n; }
  }
  const head = parts.shift()!;
  const a = head < 80n ? head / 40n : 2n;
  return [a, head - a * 40n, ...parts].join('.');
}

export function child(node: Node | undefined, index: number, what: string): Node {
  const found = node?.children[index];
  if (!found) throw bad(`missing ${what}`);
  return found;
}

export const isContext = (node: Node | undefined, tag: number) => !!node && node.cls === 2 && node.tag === tag;

/** A fault of the reader, with what was wrong apart, so that a reader of something other than CMS (a certificate) can say what it read. */
export class DerFault extends As2Fault {
  constructor(readonly detail: string) {
    super('malformed-message', `the CMS structure is malformed (${detail})`);
  }
}

function bad(detail: string): DerFault {
  return new DerFault(detail);
}
