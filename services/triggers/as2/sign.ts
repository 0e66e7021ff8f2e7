import { createHash, sign } from 'node:crypto';
import { OID, OID_OF_DIGEST, type Digest } from './algorithms';
import type { ReceiverKey } from './certificates';
import { algorithmId, integer, NULL, oid, octetString, seq, setOf, tlv, utcTime } from './der-writer';

/**
 * A detached CMS SignedData over `content` with one receiver certificate and its key, for signed MDNs
 * (which one: rotation.ts, signingKey).
 * The RSA (or ECDSA) operation is Node's, run in its thread pool (the callback form of crypto.sign), so
 * the event loop goes on with other requests meanwhile; signed attributes are contentType, signingTime,
 * messageDigest.
 */
export const ECDSA_WITH: Record<Exclude<Digest, 'md5'>, string> = {
  sha1: '1.2.840.10045.4.1', sha224: '1.2.840.10045.4.3.1', sha256: '1.2.840.10045.4.3.2', sha384: '1.2.840.10045.4.3.3', sha512: '1.2.840.10045.4.3.4',
};

export async function signDetached(content: Buffer, digest: Exclude<Digest, 'md5'>, identity: ReceiverKey, now = new Date()): Promise<Buffer> {
  const digestAlgorithm = algorithmId(OID_OF_DIGEST[digest], NULL);
  const attributes = [
    seq(oid(OID.contentTypeAttr), setOf(oid(OID.data))),
    seq(oid(OID.signingTimeAttr), setOf(utcTime(now))),
    seq(oid(OID.messageDigestAttr), setOf(octetString(createHash(digest).update(content).digest()))),
  ];
  const signedAttributes = setOf(...attributes);
  const ec = identity.key.asymmetricKeyType === 'ec';
  const signature = await new Promise<Buffer>((resolve, reject) => sign(digest, signedAttributes, identity.key, (error, out) => (error ? reject(error) : resolve(out))));
  const implicitAttributes = Buffer.from(signedAttributes);
  implicitAttributes[0] = 0xa0;
  const signerInfo = seq(
    integer(1),
    seq(identity.receiver.issuer, tlv(0x02, identity.receiver.serial)),
    digestAlgorithm,
    implicitAttributes,
    ec ? algorithmId(ECDSA_WITH[digest]) : algorithmId(OID.rsaEncryption, NULL),
    octetString(signature),
  );
  const signedData = seq(
    integer(1),
    setOf(digestAlgorithm),
    seq(oid(OID.data)),
    tlv(0xa0, identity.receiver.cert.raw),
    setOf(signerInfo),
  );
  return seq(oid(OID.signedData), tlv(0xa0, signedData));
}
