import type { Answer } from './answers';
import type { BodyValidator, InboundRequest, ReceivedBody } from './trigger';
import { heldShare, type HeldBytes, type HeldShare } from './held-bytes';

/**
 * For triggers whose answer depends on the whole body (a SOAP Fault for a bad Message, a 400 for a
 * warehouse post that is not JSON, an AS2 message to open), even a body too large to travel inline in
 * the record: the receiver streams the body through this validator, which keeps the bytes up to
 * `maxBytes` for `inspect`. A larger body gets `tooLarge` without being held.
 *
 * What such triggers hold counts against the shared HeldBytes budget (held-bytes.ts). A request that finds
 * it spent is read to its end without being kept, and `take` tells its trigger to answer "busy" (503, or a
 * failure MDN), which a sender retries.
 */
export interface WholeBody {
  validator(request: InboundRequest): BodyValidator;
  /**
   * The bytes kept for this request (the inline body when the receiver holds it anyway), 'busy' when the
   * budget had no room for them, or null. Their room in the budget is given back here.
   */
  take(request: InboundRequest, body: ReceivedBody): Buffer | 'busy' | null;
  /**
   * As take, but the room stays taken: the returned share holds it, and whoever opens the bytes adds what
   * it makes of them (AS2's decrypted layers) and releases the share once done with them.
   */
  hold(request: InboundRequest, body: ReceivedBody): { bytes: Buffer | 'busy' | null; share: HeldShare };
}

/** `holdsWhole`: the trigger persists what it keeps (BodyValidator.holdsWhole); the receiver keeps no copy. */
export function wholeBody(maxBytes: number, tooLarge: () => Answer, budget: HeldBytes, options: { holdsWhole?: boolean } = {}): WholeBody {
  const holdsWhole = options.holdsWhole ?? false;
  const kept = new WeakMap<InboundRequest, Buffer | 'busy'>();
  /** What each request holds in the budget, until take or abort gives it back. */
  const shares = new WeakMap<InboundRequest, HeldShare>();
  const release = (request: InboundRequest) => {
    shares.get(request)?.release();
    shares.delete(request);
  };
  function hold(request: InboundRequest, body: ReceivedBody) {
    const bytes = kept.get(request) ?? body.inline;
    // Without a share of its own (the body was inline, or found no room), what is added later still counts.
    const share = shares.get(request) ?? heldShare(budget);
    kept.delete(request);
    shares.delete(request);
    // A body the receiver holds inline anyway needs no room of its own.
    return { bytes: bytes === 'busy' && body.inline ? body.inline : bytes, share };
  }
  return {
    validator(request) {
      let chunks: Buffer[] | null = [];
      let size = 0;
      let busy = false;
      const share = heldShare(budget);
      shares.set(request, share);
      return {
        holdsWhole,
        write(chunk) {
          size += chunk.length;
          if (chunks === null) return true;
          if (size > maxBytes) { chunks = null; release(request); return true; }
          if (!share.take(chunk.length)) { chunks = null; busy = true; release(request); return true; }
          chunks.push(chunk);
          return true;
        },
        once: (_event, listener) => { listener(); },
        async end() {
          if (size > maxBytes) return tooLarge();
          kept.set(request, busy ? 'busy' : Buffer.concat(chunks ?? [], size));
          chunks = null;
          return null;
        },
        abort() {
          chunks = null;
          kept.delete(request);
          release(request);
        },
      };
    },
    take(request, body) {
      const { bytes, share } = hold(request, body);
      share.release();
      return bytes;
    },
    hold,
  };
}
