/**
 * One memory budget for request bodies, shared by everything that holds them while they arrive: the
 * receiver (up to INLINE_BODY_MAX of each body) and the triggers that keep a body whole before answering
 * (whole-body.ts: logistics, warehouse, AS2, whose message keeps its room, and takes more for each layer it
 * is opened into, until its MDN is made), and the webhook trigger while it verifies a Standard Webhooks
 * `v1a` signature on a staged body read back whole (webhook/auth/signed-bodies.ts). Without it, a
 * thousand stalled uploads would hold a thousand bodies, and a hundred slow 16 MiB ones (before any
 * authentication, for triggers whose credentials are inside the body) 1.6 GB. A request that finds the
 * budget spent is answered busy, which senders retry.
 */

/** The budget, unless configured (MAX_HELD_BODY_BYTES). */
export const DEFAULT_HELD_BODY_BYTES = 256 * 1024 * 1024;

export interface HeldBytes {
  /**
   * Room for `bytes` more of a body that already holds `own`. A body alone in the budget always gets it
   * (up to its own limit), so a budget below the largest body never refuses that body for ever.
   */
  tryTake(bytes: number, own: number): boolean;
  give(bytes: number): void;
  held(): number;
}

/** One holder's part of the budget (a body, a message's inflated bytes): what it took, all given back by release. */
export interface HeldShare {
  /** Room for `bytes` more; false when the budget has none (nothing is taken then). */
  take(bytes: number): boolean;
  release(): void;
}

/** A share of `budget`; with no budget, every take succeeds. */
export function heldShare(budget: HeldBytes | null): HeldShare {
  let holding = 0;
  return {
    take(bytes) {
      if (!budget) return true;
      if (!budget.tryTake(bytes, holding)) return false;
      holding += bytes;
      return true;
    },
    release() {
      if (budget && holding > 0) budget.give(holding);
      holding = 0;
    },
  };
}

export function heldBytes(maxBytes: number): HeldBytes {
  let held = 0;
  return {
    tryTake(bytes, own) {
      if (held > own && held + bytes > maxBytes) return false;
      held += bytes;
      return true;
    },
    give(bytes) { held -= bytes; },
    held: () => held,
  };
}
