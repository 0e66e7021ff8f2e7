import type { IngressErrorCode } from '../../answers';

/**
 * A signature over the body, prepared at admission from the request's headers and the credential, then fed
 * the raw bytes as they arrive (before anything inflates or parses them) and judged after the last one.
 */
export interface BodySignatureCheck {
  update(chunk: Buffer): void;
  /**
   * After the last byte: `needs-whole-body` when no MAC matched but a signature remains that only the whole
   * message can check (Standard Webhooks `v1a`, Ed25519, which cannot be computed in pieces).
   */
  finish(): 'verified' | 'wrong' | 'needs-whole-body';
  /**
   * For `needs-whole-body`: the signed message is `prefix` then the body, and `verify` judges it whole. The
   * prefix is handed out, not prepended inside, so that a staged body read back goes straight into one
   * buffer with room for it: holding the body twice (read, then copied behind the prefix) would double
   * what the held-bytes budget has to count.
   */
  whole?: { prefix: Buffer; verify(message: Buffer): boolean };
}

/** What admission makes of the headers: a refusal (401 missing, 403 wrong, a timestamp out of its window), or a check to run. */
export type SignatureAdmission =
  | { ok: false; code: IngressErrorCode; message?: string }
  | { ok: true; check: BodySignatureCheck; secretHeaders: string[] };
