import { child, isContext, parseDer, rawOf, type Node } from '../../services/triggers/as2/der';

/**
 * Changes to BouncyCastle's AES-GCM EnvelopedData (BER: the ContentInfo, EnvelopedData and
 * EncryptedContentInfo have indefinite lengths, so a node inside may change size without fixing them).
 */
export interface BcParts { env: Node; algorithm: Node; params: Node; encrypted: Node; encryptedKey: Node }

export function bcParts(der: Buffer): BcParts {
  const env = child(child(parseDer(der), 1, 'content'), 0, 'EnvelopedData');
  const eci = child(env, 2, 'encryptedContentInfo');
  const algorithm = child(eci, 1, 'algorithm');
  const encrypted = eci.children.find((n) => isContext(n, 0))!;
  const encryptedKey = child(child(child(env, 1, 'recipientInfos'), 0, 'ktri'), 3, 'encryptedKey');
  return { env, algorithm, params: child(algorithm, 1, 'params'), encrypted, encryptedKey };
}

/** The message with one node's whole encoding replaced (only safe where every enclosing length is indefinite or the size is kept). */
export function replaceNode(der: Buffer, node: Node, encoding: Buffer): Buffer {
  return Buffer.concat([der.subarray(0, node.start), encoding, der.subarray(node.outerEnd)]);
}

/** The primitive pieces of the encrypted content, in order (one piece for DER, several for BER chunks). */
function pieces(node: Node): Node[] { return node.constructed ? node.children.flatMap(pieces) : [node]; }

/** The offset in `der` of the content octet `fromEnd` bytes before the end of the encrypted content (1 = the last tag octet). */
export function contentOffsetFromEnd(der: Buffer, fromEnd: number): number {
  let left = fromEnd;
  for (const p of pieces(bcParts(der).encrypted).reverse()) {
    const length = p.end - p.contentStart;
    if (left <= length) return p.end - left;
    left -= length;
  }
  throw new Error('the encrypted content is shorter than that');
}

export function flipped(der: Buffer, offset: number, mask = 0x01): Buffer {
  const out = Buffer.from(der);
  out[offset] ^= mask;
  return out;
}

/** A DER TLV with a short or long definite length. */
export function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  const length = n < 128 ? Buffer.from([n]) : n < 256 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), length, content]);
}

/** The contentEncryptionAlgorithm rebuilt with other GCMParameters (nonce, and ICVlen when given). */
export function withGcmParameters(der: Buffer, nonce: Buffer, icvLen?: number): Buffer {
  const { algorithm } = bcParts(der);
  const fields = [tlv(0x04, nonce), ...(icvLen === undefined ? [] : [tlv(0x02, Buffer.from([icvLen]))])];
  return replaceNode(der, algorithm, tlv(0x30, Buffer.concat([rawOf(algorithm.children[0]), tlv(0x30, Buffer.concat(fields))])));
}

/** The encrypted content cut to its first `keep` octets (one primitive OCTET STRING inside the BER [0]). */
export function withContentCut(der: Buffer, keep: number): Buffer {
  const { encrypted } = bcParts(der);
  const all = Buffer.concat(pieces(encrypted).map((p) => der.subarray(p.contentStart, p.end)));
  if (!encrypted.constructed) throw new Error('expected a BER constructed [0]');
  return replaceNode(der, encrypted, Buffer.concat([Buffer.from([0xa0, 0x80]), tlv(0x04, all.subarray(0, keep)), Buffer.from([0, 0])]));
}
