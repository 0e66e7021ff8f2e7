/**
 * Every AS2 fault in one table (the pyas2-lib `exceptions.py` idea, DESIGN.md §8): the MDN disposition
 * modifier it answers with and the HTTP status of that answer. Code raises a fault by name; nothing
 * else picks a disposition or a status.
 *
 * The detail of a fault goes to the MDN's human-readable part and the logs; it never names key
 * material, payload bytes, or — for decryption — which step failed (no padding oracle).
 */
export const AS2_FAULTS = {
  'missing-header': { modifier: 'unexpected-processing-error', status: 400 },
  'authentication-failed': { modifier: 'authentication-failed', status: 200 },
  /** A valid signature, by a certificate other than the pinned one: the one fault told apart inside encryption (unwrap.ts). */
  'signer-not-pinned': { modifier: 'authentication-failed', status: 200 },
  /**
   * A valid signature, by a certificate outside its validity at the time of receipt (expired, or not yet
   * valid). Decided only once the signature holds, so, like signer-not-pinned, told apart inside encryption.
   */
  'signer-outside-validity': { modifier: 'authentication-failed', status: 200 },
  'decryption-failed': { modifier: 'decryption-failed', status: 200 },
  /**
   * An encrypted message to a receiver certificate outside its validity at the time of receipt (the one
   * its recipient info names, or every one we hold): refused before any private-key operation; it depends
   * on our configuration, the clock and the recipient id sent in the clear, never on the ciphertext, so it
   * is no oracle (rotation.ts). A recipient id naming none of ours is plain decryption-failed.
   */
  'receiver-outside-validity': { modifier: 'decryption-failed', status: 200 },
  'decompression-failed': { modifier: 'decompression-failed', status: 200 },
  'integrity-check-failed': { modifier: 'integrity-check-failed', status: 200 },
  'insufficient-message-security': { modifier: 'insufficient-message-security', status: 200 },
  /**
   * A Receipt-Delivery-Option URL that no allow-list entry (the credential's or the node's asyncMdnUrls)
   * matches, or that is no http(s) URL: refused before anything is accepted, with this MDN answered
   * synchronously (we never call a URL that is not allowed).
   */
  'async-mdn-url-not-allowed': { modifier: 'unexpected-processing-error', status: 200 },
  'malformed-message': { modifier: 'unexpected-processing-error', status: 200 },
  'unsupported-algorithm': { modifier: 'unexpected-processing-error', status: 200 },
  'not-accepted': { modifier: 'unexpected-processing-error', status: 200 },
  'credential-unavailable': { modifier: 'unexpected-processing-error', status: 200 },
} as const satisfies Record<string, { modifier: string; status: number }>;

export type As2FaultCode = keyof typeof AS2_FAULTS;

/** Longest fault detail (MDN text and logs): attacker-sized values must not grow the answer. */
export const MAX_DETAIL_CHARS = 200;

export class As2Fault extends Error {
  readonly modifier: string;
  readonly status: number;
  /**
   * The server-side reason, for the logs only (never the MDN): set when the partner-facing detail was
   * replaced by a fixed text (faults inside encrypted content, see unwrap.ts).
   */
  readonly reason: string | null;
  constructor(readonly code: As2FaultCode, detail: string, reason: string | null = null) {
    super(detail.length > MAX_DETAIL_CHARS ? `${detail.slice(0, MAX_DETAIL_CHARS - 1)}…` : detail);
    this.reason = reason && reason.length > MAX_DETAIL_CHARS ? `${reason.slice(0, MAX_DETAIL_CHARS - 1)}…` : reason;
    this.name = 'As2Fault';
    this.modifier = AS2_FAULTS[code].modifier;
    this.status = AS2_FAULTS[code].status;
  }
}

/** Any error as a fault: an unexpected one becomes unexpected-processing-error without its message. */
export function asFault(error: unknown): As2Fault {
  return error instanceof As2Fault ? error : new As2Fault('malformed-message', 'the message could not be processed');
}
