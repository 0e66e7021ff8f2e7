import type { HeldShare } from '../held-bytes';
import { As2Fault } from './faults';

/** The fault of a message that found no room in the memory budget: nothing is accepted, the partner sends it again. */
export const notAccepted = () => new As2Fault('not-accepted', 'the message could not be taken for processing now; send it again later');

/**
 * Room for `bytes` more of a message being opened, in its share of the budget; else the whole share goes back
 * at once, the raw message's room too, and not-accepted is thrown.
 *
 * At once, in the same turn as the refusal: while the refused message makes its failure MDN, the message beside
 * it must not find that room still taken, or two messages that each fit alone refuse each other every time they
 * arrive together. The first one refused gives everything back, so the
 * other, alone in the budget then, always gets its room. Such a refusal keeps no evidence (as2-trigger.ts), so
 * nothing of the refused message outlives it beyond the making of its failure MDN.
 */
export function takeRoom(held: HeldShare, bytes: number): void {
  if (held.take(bytes)) return;
  held.release();
  throw notAccepted();
}
