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
 */
export function namedReceiverKey(transports: Node[], identity: As2Identity, receivedAt: number): { key: ReceiverKey; transport: Node } {
  const named: { key: ReceiverKey; transport: Node }[] = [];
  for (const transport of transports) {
    const rid = transport.children[1];
    if (!rid) continue;
    for (const key of identity.receivers) if (identifies(rid, key.receiver)) named.push({ key, transport });
  }
  // With one receiver key there is nothing to choose, and nothing for a choice to give away: a recipient id in a
  // form we do not recognise (a re-encoded issuer name, a key id our certificate lacks) is tried with that key,
  // as before rotation existed. With several, a message naming none of them is refused. Retired keys (the
  // decoder's) do not count: the receiver, which has none, made the same choice with the one current key.
  if (named.length === 0 && identity.currentReceivers === 1 && transports.length > 0) return { key: identity.receivers[0], transport: transports[0] };
  if (named.length === 0) throw new As2Fault('decryption-failed', 'the message is encrypted to a certificate that is not one of the receiver certificates');
  named.sort(newestFirst((n) => n.key.receiver));
  const valid = named.find((n) => validityAt(n.key.receiver.cert, receivedAt) === 'valid');
  if (!valid) throw receiverOutside(named[0].key.receiver, receivedAt);
  return valid;
}

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
