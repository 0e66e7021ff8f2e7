import type { Answer } from './answers';
import type { BodyValidator, InboundRequest, ReceivedBody } from './trigger';

/**
 * For triggers whose answer depends on the whole body (a SOAP Fault for a bad Message, a 400 for a
 * warehouse post that is not JSON), even a body too large to travel inline in the record: the receiver
 * streams the body through this validator, which keeps the bytes up to `maxBytes` for `inspect`.
 * A larger body gets `tooLarge` without being held.
 */
export interface WholeBody {
  validator(request: InboundRequest): BodyValidator;
  /** The bytes kept for this request (the inline body when the receiver holds it anyway). */
  take(request: InboundRequest, body: ReceivedBody): Buffer | null;
}

export function wholeBody(maxBytes: number, tooLarge: () => Answer): WholeBody {
  const kept = new WeakMap<InboundRequest, Buffer>();
  return {
    validator(request) {
      let chunks: Buffer[] | null = [];
      let size = 0;
      return {
        write(chunk) {
          if (chunks === null) return true;
          size += chunk.length;
          if (size > maxBytes) chunks = null; else chunks.push(chunk);
          return true;
        },
        once: (_event, listener) => { listener(); },
        async end() {
          if (chunks === null) return tooLarge();
          kept.set(request, Buffer.concat(chunks, size));
          chunks = null;
          return null;
        },
        abort() { chunks = null; },
      };
    },
    take(request, body) {
      const bytes = kept.get(request) ?? body.inline;
      kept.delete(request);
      return bytes;
    },
  };
}
