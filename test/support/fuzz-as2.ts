import { constants, createCipheriv, publicEncrypt, randomBytes, X509Certificate } from 'node:crypto';
import { parseDer, type Node } from '../../services/triggers/as2/der';
import type { Rng } from './prng';

/**
 * Seeded mutation of AS2 messages for property tests (test/unit/as2-fuzz.test.ts; the PRNG is prng.ts): a DER tree
 * that re-encodes with consistent outer lengths around one damaged node (so damage reaches every depth, not
 * only the first length that no longer adds up), MIME damage, and an in-process CMS EnvelopedData writer, so
 * that damaged content can be sealed again without openssl.
 */

// ---- DER ----

export function derLength(n: number): Buffer {
  if (n < 128) return Buffer.from([n]);
  const b: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) b.unshift(v & 0xff);
  return Buffer.from([0x80 | b.length, ...b]);
}

export function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

/** A mutable TLV: re-encoded with minimal definite lengths unless `length` says otherwise. */
export interface Tlv {
  tag: Buffer;
  children: Tlv[] | null;
  content: Buffer;
  /** The length octets to write instead of the true one (given the content's length), or 'indefinite'. */
  length?: ((n: number) => Buffer) | 'indefinite';
}

function tagBytes(node: Node): Buffer {
  let p = node.start + 1;
  if ((node.buf[node.start] & 0x1f) === 0x1f) while (node.buf[p++] & 0x80);
  return node.buf.subarray(node.start, p);
}

export function toTlv(node: Node): Tlv {
  return { tag: Buffer.from(tagBytes(node)), children: node.constructed ? node.children.map(toTlv) : null, content: Buffer.from(node.buf.subarray(node.contentStart, node.end)) };
}

export function encodeTlv(t: Tlv): Buffer {
  const content = t.children ? Buffer.concat(t.children.map(encodeTlv)) : t.content;
  if (t.length === 'indefinite') return Buffer.concat([t.tag, Buffer.from([0x80]), content, Buffer.from([0, 0])]);
  return Buffer.concat([t.tag, t.length ? t.length(content.length) : derLength(content.length), content]);
}

/** Every TLV of the tree with its parent, depth first. */
function walk(t: Tlv, parent: Tlv | null = null, out: { t: Tlv; parent: Tlv | null }[] = []) {
  out.push({ t, parent });
  for (const c of t.children ?? []) walk(c, t, out);
  return out;
}

const OIDS = [
  '06092a864886f70d010701', '06092a864886f70d010702', '06092a864886f70d010703', '060b2a864886f70d0109100117',
  '060b2a864886f70d0109100109', '060b2a864886f70d0109100308', '0609608648016503040102',
  '0609608648016503040106', '06092a864886f70d010101', '06092a864886f70d010107', '06092a864886f70d01010a',
  '0609608648016503040201', '06052b0e03021a', '06082a864886f70d0205', '06092a864886f70d010903', '06092a864886f70d010904',
].map((h) => Buffer.from(h, 'hex').subarray(2));

/** Length octets that lie: what a hostile or broken sender writes. */
const LYING_LENGTHS: ((n: number) => Buffer)[] = [
  () => Buffer.from([0x84, 0xff, 0xff, 0xff, 0xff]),
  () => Buffer.from([0x84, 0x80, 0x00, 0x00, 0x00]),
  () => Buffer.from([0x84, 0x7f, 0xff, 0xff, 0xff]),
  () => Buffer.from([0x85, 0x01, 0x00, 0x00, 0x00, 0x00]),
  () => Buffer.from([0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
  () => Buffer.from([0xff]),
  () => Buffer.from([0x81]),
  (n) => Buffer.from([0x84, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]), // overlong, true value
  (n) => Buffer.from([0x82, (n >> 8) & 0xff, n & 0xff]),
  (n) => derLength(n + 1),
  (n) => derLength(Math.max(0, n - 1)),
  (n) => derLength(n + 1000),
  () => Buffer.from([0x00]),
];

/** One damage to a DER tree, at a node chosen at random; the tree re-encodes consistently around it. */
export function mutateDer(rng: Rng, original: Buffer): { bytes: Buffer; what: string } {
  let root: Tlv;
  try { root = toTlv(parseDer(original)); } catch { return { bytes: flipBytes(rng, original), what: 'flip (unparsable base)' }; }
  const nodes = walk(root);
  const rounds = rng.chance(0.8) ? 1 : rng.int(2, 4);
  const what: string[] = [];
  let raw: Buffer | null = null;
  for (let r = 0; r < rounds; r++) {
    const { t, parent } = rng.pick(nodes);
    const kind = rng.int(0, 11);
    if (kind === 0) { t.length = rng.pick(LYING_LENGTHS); what.push('lying length'); }
    else if (kind === 1) { t.length = 'indefinite'; what.push(t.children ? 'indefinite' : 'indefinite primitive'); }
    else if (kind === 2 && parent?.children) { parent.children.splice(parent.children.indexOf(t), 1); what.push('node removed'); }
    else if (kind === 3 && parent?.children) { parent.children.splice(parent.children.indexOf(t), 0, { ...t }); what.push('node duplicated'); }
    else if (kind === 4) { t.tag = Buffer.from([t.tag[0] ^ rng.pick([0x20, 0x40, 0x80, 0xc0, 0x01, 0x1f])]); what.push('tag changed'); }
    else if (kind === 5) { t.tag = Buffer.from([t.tag[0] | 0x1f, ...rng.pick([[0x81, 0x80, 0x80, 0x80, 0x01], [0x80, 0x01], [0x7f], [0x81]])]); what.push('high tag number'); }
    else if (kind === 6) {
      const oid = nodes.filter((n) => n.t.tag[0] === 0x06);
      const target = oid.length ? rng.pick(oid).t : t;
      target.children = null;
      target.content = rng.pick<() => Buffer>([
        () => rng.pick(OIDS), () => Buffer.concat([target.content, Buffer.from([0x80])]), () => Buffer.alloc(0),
        () => Buffer.alloc(rng.int(60, 200), 0x81), () => rng.bytes(rng.int(1, 12)), () => Buffer.concat([Buffer.from([0x80]), target.content]),
        () => Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
      ])();
      what.push('OID replaced');
    } else if (kind === 7) {
      // Nesting: wrap the node in many constructed layers.
      const depth = rng.pick([10, 31, 32, 33, 40, 200, 1000]);
      let wrapped: Tlv = t;
      for (let d = 0; d < depth; d++) wrapped = { tag: Buffer.from([rng.pick([0x30, 0x31, 0xa0, 0x24])]), children: [wrapped], content: Buffer.alloc(0), length: rng.chance(0.5) ? 'indefinite' : undefined };
      if (parent?.children) parent.children[parent.children.indexOf(t)] = wrapped; else root = wrapped;
      what.push(`nested ${depth}`);
    } else if (kind === 8) {
      // A constructed (BER) string of pieces, or a primitive replaced by random bytes.
      if (!t.children && rng.chance(0.5)) {
        const pieces: Tlv[] = [];
        for (let at = 0; at < t.content.length; at += 1 + rng.int(0, 40)) pieces.push({ tag: Buffer.from([t.tag[0] & ~0x20]), children: null, content: t.content.subarray(at, at + 1 + rng.int(0, 40)) });
        t.tag = Buffer.from([t.tag[0] | 0x20]);
        t.children = pieces;
        t.length = rng.chance(0.5) ? 'indefinite' : undefined;
        what.push('constructed string');
      } else {
        t.children = null;
        t.content = rng.bytes(rng.int(0, 64));
        what.push('content random');
      }
    } else if (kind === 9) {
      t.children = null;
      t.content = t.content.subarray(0, rng.int(0, t.content.length));
      what.push('content cut');
    } else if (kind === 10) {
      // Many siblings: element count bounds.
      if (t.children) { const n = rng.pick([100, 5000, 120_000]); t.children = Array.from({ length: n }, () => ({ tag: Buffer.from([0x05]), children: null, content: Buffer.alloc(0) })); what.push(`${n} children`); }
    } else {
      raw = flipBytes(rng, encodeTlv(root));
      what.push('bytes flipped');
    }
  }
  let bytes = raw ?? encodeTlv(root);
  if (rng.chance(0.15)) { bytes = bytes.subarray(0, rng.int(0, bytes.length)); what.push('truncated'); }
  if (rng.chance(0.05)) { bytes = Buffer.concat([bytes, rng.bytes(rng.int(1, 8))]); what.push('trailing bytes'); }
  return { bytes, what: what.join(', ') };
}

export function flipBytes(rng: Rng, data: Buffer): Buffer {
  const out = Buffer.from(data);
  for (let k = rng.int(1, 4); k > 0 && out.length; k--) out[rng.int(0, out.length - 1)] = rng.chance(0.5) ? rng.int(0, 255) : out[rng.int(0, out.length - 1)] ^ (1 << rng.int(0, 7));
  return out;
}

// ---- MIME ----

/** One damage to a MIME entity or multipart body, as text on bytes (latin1: one byte, one char). */
export function mutateMime(rng: Rng, entity: Buffer, boundary: string | null): { bytes: Buffer; what: string } {
  let text = entity.toString('latin1');
  const headEnd = Math.max(0, text.search(/\r?\n\r?\n/));
  const kind = rng.int(0, 13);
  const at = (s: number, e: number) => rng.int(s, Math.max(s, e));
  let what = '';
  if (kind === 0 && boundary) { text = text.split(`--${boundary}`).join(`--${rng.pick([boundary.slice(1), `${boundary}x`, ''])}`); what = 'boundary changed in the body'; }
  else if (kind === 1 && boundary) {
    const occurrences = [...text.matchAll(new RegExp(`--${boundary.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'g'))].map((m) => m.index!);
    if (occurrences.length) { const i = rng.pick(occurrences); text = text.slice(0, i) + rng.pick(['', '-', `--${boundary}--`, `--${boundary}\r\n\r\n--${boundary}`]) + text.slice(i + 2 + boundary.length); }
    what = 'a delimiter removed, duplicated or closed early';
  } else if (kind === 2) { text = text.replace(/\r\n/g, '\n'); what = 'LF line ends'; }
  else if (kind === 3) { const i = at(0, headEnd); text = `${text.slice(0, i)}\r\n\t${'x'.repeat(rng.pick([1, 100, 70_000]))}${text.slice(i)}`; what = 'folded or huge header'; }
  else if (kind === 4) { text = `${rng.pick(['Content-Type: text/plain', 'Content-Transfer-Encoding: base64', 'Content-Transfer-Encoding: quoted-printable', 'Content-Type: multipart/signed; boundary=""', 'X: y', ': novalue', 'no colon', '\u0000: \u0000', '__proto__: x', 'constructor: x'])}\r\n${text}`; what = 'header prepended'; }
  else if (kind === 5) {
    const cte = rng.pick(['base64', 'BASE64', 'quoted-printable', '7bit', '8bit', 'binary', 'x-uuencode', ' base64 ', 'base64; x=y', '']);
    text = /content-transfer-encoding:[^\r\n]*/i.test(text) ? text.replace(/content-transfer-encoding:[^\r\n]*/i, `Content-Transfer-Encoding: ${cte}`) : `Content-Transfer-Encoding: ${cte}\r\n${text}`;
    what = `CTE ${cte}`;
  } else if (kind === 6) { text = text.slice(0, rng.int(0, text.length)); what = 'truncated'; }
  else if (kind === 7) { text = text.slice(0, headEnd) + text.slice(headEnd).replace(/\r?\n\r?\n/, rng.pick(['\r\n', '\n\r\n', '\r\n\r\n\r\n', ''])); what = 'end of headers damaged'; }
  else if (kind === 8) { text = text.replace(/content-type:[^\r\n]*/i, (h) => h + rng.pick(['; boundary=', '; boundary="', `; boundary="${'b'.repeat(71)}"`, '; smime-type=compressed-data', '; smime-type=signed-data', ';;;;', `; boundary=${'x'.repeat(20_000)}`])); what = 'content-type parameter'; }
  else if (kind === 9) { const i = at(0, text.length); text = text.slice(0, i) + rng.pick(['=', '==', '=\r\n', '=ZZ', '\u00ff', '\r', '\u0000', '--']) + text.slice(i); what = 'byte inserted'; }
  else if (kind === 10) { text = text.replace(/\r?\n\r?\n/, (m) => `${m}${'\r\n'.repeat(rng.int(1, 3))}`); what = 'blank lines after headers'; }
  else if (kind === 11 && boundary) { text = `${text}\r\n--${boundary}\r\nContent-Type: text/plain\r\n\r\nextra\r\n--${boundary}--\r\n`; what = 'a part after the close'; }
  else if (kind === 12) { text = text.replace(/^([A-Za-z-]+):/m, (_m, name: string) => `${rng.pick([name.toUpperCase(), `${name} `, ` ${name}`, name])}:`); what = 'header name spelling'; }
  else { return { bytes: flipBytes(rng, entity), what: 'bytes flipped' }; }
  return { bytes: Buffer.from(text, 'latin1'), what };
}

// ---- CMS EnvelopedData, in process ----

const OID_ENVELOPED = Buffer.from('06092a864886f70d010703', 'hex');
const OID_DATA = Buffer.from('06092a864886f70d010701', 'hex');
const OID_RSA = Buffer.from('06092a864886f70d010101', 'hex');
const OID_AES128_CBC = Buffer.from('0609608648016503040102', 'hex');

/** `content` sealed to `certificate` with AES-128-CBC and RSA PKCS#1 v1.5 key transport (RFC 5652 §6). */
export function envelope(content: Buffer, certificate: string): Buffer {
  const cert = new X509Certificate(certificate);
  const key = randomBytes(16);
  const iv = randomBytes(16);
  const cipher = createCipheriv('aes-128-cbc', key, iv);
  const encrypted = Buffer.concat([cipher.update(content), cipher.final()]);
  const tbs = parseDer(cert.raw).children[0];
  const at = tbs.children[0].cls === 2 ? 1 : 0;
  const rawOf = (n: Node) => n.buf.subarray(n.start, n.outerEnd);
  const rid = der(0x30, rawOf(tbs.children[at + 2]), rawOf(tbs.children[at]));
  const encryptedKey = publicEncrypt({ key: cert.publicKey, padding: constants.RSA_PKCS1_PADDING }, key);
  const ktri = der(0x30, der(0x02, Buffer.from([0])), rid, der(0x30, OID_RSA, Buffer.from([0x05, 0x00])), der(0x04, encryptedKey));
  const eci = der(0x30, OID_DATA, der(0x30, OID_AES128_CBC, der(0x04, iv)), der(0x80, encrypted));
  return der(0x30, OID_ENVELOPED, der(0xa0, der(0x30, der(0x02, Buffer.from([0])), der(0x31, ktri), eci)));
}
