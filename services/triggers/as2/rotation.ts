import { identifies, type As2Identity, type CertificateFacts, type ReceiverKey } from './certificates';
import type { Node } from './der';
import { As2Fault } from './faults';
import { validFrom, validityAt, validTo } from '../../platform/registry/certificate-facts';

/**
 * Which of a credential's certificates is used when (certificate rotation, issue #21). A credential may
 * hold several receiver key pairs and several pinned partner certificates; each is used only inside its
 * validity at the time of receipt. The choice is made from our configuration, the clock and what the
 * message names in the clear (RecipientIdentifier, SignerIdentifier) — never by trying keys: with
 * implicit rejection (key-transport.ts) a trial decryption would make a bad key transport answer
 * depend on which key happened to match, an oracle.
 */

/** The newest first: latest notBefore. */
const newestFirst = <T>(of: (item: T) => CertificateFacts) => (a: T, b: T) => validFrom(of(b).cert).getTime() - validFrom(of(a).cert).getTime();

/**
 * Before any enveloped layer is looked at: some receiver certificate must be valid at receipt. This reads
 * our configuration and the clock only, so a credential whose every certificate lapsed answers every
 * ciphertext alike, and no private-key operation is made with a lapsed key.
 */
export function someReceiverValidAt(identity: As2Identity, receivedAt: number): void {
  if (identity.receivers.some((r) => validityAt(r.receiver.cert, receivedAt) === 'valid')) return;
  const [newest] = [...identity.receivers].sort(newestFirst((r) => r.receiver));
  if (identity.receivers.length === 1) throw receiverOutside(newest.receiver, receivedAt);
  const cert = newest.receiver.cert;
  throw new As2Fault('receiver-outside-validity', validityAt(cert, receivedAt) === 'expired'
    ? `every receiver certificate is outside its validity: the newest expired on ${validTo(cert).toISOString()}`
    : `every receiver certificate is outside its validity: the newest is not valid before ${validFrom(cert).toISOString()}`);
}

/**
 * The receiver key the message's key transport recipient infos name (issuer and serial number, or subject
 * key identifier), with the recipient info that names it. A message encrypted to a certificate that is not
 * ours is decryption-failed; to one of ours outside its validity at receipt, receiver-outside-validity.
 * Both are decided from the recipient ids, which are sent in the clear, before any private-key operation.
 * When several of ours are named (a sender encrypting to the old and the new one), a valid one is taken,
 * the newest first.
 *
 * The decoder makes the receiver's choice again: the key the receiver opened the message with is recorded
 * (`as2.receiverKey`, identity.openedWith: the key's fingerprint, not its certificate's), and that key is taken
 * whenever it is named or nothing is, in any certificate of it the credential holds by then (current or retired).
 * A choice re-made from the credential as it is at decode time could differ after a rotation (a second current
 * key, the key replaced) and strand a message answered `processed`; a certificate issued again for the same key
 * (the old one forgotten) is the same key and must not.
 */
export function namedReceiverKey(transports: Node[], identity: As2Identity, receivedAt: number): { key: ReceiverKey; transport: Node } {
  const named: { key: ReceiverKey; transport: Node }[] = [];
  for (const transport of transports) {
    const rid = transport.children[1];
    if (!rid) continue;
    for (const key of identity.receivers) if (identifies(rid, key.receiver)) named.push({ key, transport });
  }
  if (identity.openedWith && transports.length > 0) {
    const recorded = identity.receivers.filter((r) => r.receiver.keyFingerprint === identity.openedWith);
    if (recorded.length === 0) {
      // Within the 200 characters a fault keeps (faults.ts): which key, and what opens the record again.
      throw new As2Fault('decryption-failed', `receiver key ${identity.openedWith} (SHA-256 of its SubjectPublicKeyInfo) opened it at receipt; no certificate of it is left: put any one back, replay`);
    }
    // Named: the recipient info that names it (as the receiver took it); named by none: the first, as the receiver took it.
    if (named.length === 0) return { key: recorded[0], transport: transports[0] };
    const mine = named.find((n) => recorded.includes(n.key));
    if (mine) return mine;
    // A nested enveloped layer encrypted to another of our keys: chosen by name, below.
  }
  if (named.length === 0 && transports.length > 0) {
    const only = onlyKeyAtReceipt(identity, receivedAt);
    if (only) return { key: only, transport: transports[0] };
  }
  if (named.length === 0) throw new As2Fault('decryption-failed', 'the message is encrypted to a certificate that is not one of the receiver certificates');
  named.sort(newestFirst((n) => n.key.receiver));
  const valid = named.find((n) => validityAt(n.key.receiver.cert, receivedAt) === 'valid');
  if (!valid) throw receiverOutside(named[0].key.receiver, receivedAt);
  return valid;
}

/**
 * A message whose recipient ids name none of our certificates (one in a form we do not recognise: a re-encoded
 * issuer name, a key id our certificate lacks) is opened with the one key there was to open it with at receipt,
 * as before rotation existed; when there were several, it is refused: choosing among them by trying each would
 * make the answer depend on which key happened to match (the oracle above). "At receipt": a current key, or one
 * an earlier put retired after the time of receipt (the decoder's), whose certificate was valid then; when only
 * one key could have been current, that one (the receiver's single key, valid by someReceiverValidAt).
 *
 * The receiver has no retired keys: this is its single current key valid now. The decoder needs it only for a
 * record written before the key that opened it was recorded; the key the receiver used is always among these
 * (current then, so current now or retired since, and valid then), so when it is the only one it is the right
 * one, and when it is not, the record is refused (dead-lettered) rather than opened by trial (docs/as2.md).
 * Counted by key, not by certificate: certificates of one key (one issued again) are one choice, not several.
 * The candidates over-count: a key retired after receipt may have been added after it too (the credential keeps
 * no time of adding), so such a record can be refused though only one key was current when it came.
 */
function onlyKeyAtReceipt(identity: As2Identity, receivedAt: number): ReceiverKey | null {
  const couldBeCurrent = identity.receivers.filter((r, i) => i < identity.currentReceivers || (r.retiredAt ?? Infinity) > receivedAt);
  if (distinctKeys(couldBeCurrent) === 1) return couldBeCurrent[0];
  const valid = couldBeCurrent.filter((r) => validityAt(r.receiver.cert, receivedAt) === 'valid');
  return distinctKeys(valid) === 1 ? valid[0] : null;
}

const distinctKeys = (keys: ReceiverKey[]) => new Set(keys.map((k) => k.receiver.keyFingerprint)).size;

/**
 * The pinned partner certificate the signer id names, or null when none does. When several pinned ones
 * carry the same name, the one valid at receipt is preferred; else the verifier refuses the signer as
 * outside its validity once its signature held (verify.ts).
 */
export function namedPartner(sid: Node, partners: readonly CertificateFacts[], receivedAt: number): CertificateFacts | null {
  const named = partners.filter((p) => identifies(sid, p));
  return named.find((p) => validityAt(p.cert, receivedAt) === 'valid') ?? named[0] ?? null;
}

/**
 * The key an MDN is signed with: the newest (latest notBefore) receiver key valid at `now`, so partners
 * see the new certificate as soon as it is valid. When none is valid, the newest all the same: the MDN
 * still says what happened, and the partner's own check judges the certificate.
 */
export function signingKey(identity: As2Identity, now: number): ReceiverKey {
  const ordered = [...identity.receivers].sort(newestFirst((r) => r.receiver));
  return ordered.find((r) => validityAt(r.receiver.cert, now) === 'valid') ?? ordered[0];
}

function receiverOutside(facts: CertificateFacts, at: number): As2Fault {
  const what = 'the receiver certificate';
  const cert = facts.cert;
  return validityAt(cert, at) === 'expired'
    ? new As2Fault('receiver-outside-validity', `the message is encrypted to ${what}, which expired on ${validTo(cert).toISOString()}; encrypt to the receiver's current certificate`)
    : new As2Fault('receiver-outside-validity', `the message is encrypted to ${what}, which is not valid before ${validFrom(cert).toISOString()}`);
}
