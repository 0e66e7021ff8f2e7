import { MAX_RECORD_BYTES } from '../../platform/log/event-log';
import { BUSY, errorAnswer, IngressError } from '../answers';
import { heldShare, type HeldBytes } from '../held-bytes';
import type { InboundRequest, InspectOutcome, ReceivedBody, TriggerServices } from '../trigger';
import { inflateSync, parseEncoding } from './content-encoding';
import { decodeInMemory } from './decode';
import { bodyKind, parseMediaType } from './media-type';
import type { WebhookParameters } from './parameters';

/**
 * The decoded value of a request travels in one log record (the decoded record, then the execution request),
 * so a body accepted here must decode to JSON that fits one, less room for the record's other fields: else it
 * would be answered 200 and then dead-lettered as `output-too-large`, which no replay mends.
 *
 * Bodies read whole (JSON, forms, XML, text) are held to this size after inflation anyway. What one decodes to
 * can be larger than its bytes, though: up to six times (a control character in text becomes `\u0001`; `1e20,`
 * in JSON becomes 21 digits and a comma; a byte that is not UTF-8 becomes U+FFFD). So a body of more than a sixth
 * of it is decoded here, as the decoder will, and measured. Multipart fields are counted as they stream
 * (multipart.ts).
 */
export const MAX_DECODED_VALUE_BYTES = MAX_RECORD_BYTES - 64 * 1024;
const MOST_EXPANSION = 6;

/**
 * A refusal when the body decodes to more than MAX_DECODED_VALUE_BYTES (413) or cannot be read as its type
 * (400, now rather than as a dead letter); null when it fits. Bodies small enough never to pass the bound are
 * not looked at. A staged body read back takes room in `held` (503 when there is none), as a v1a signature's.
 */
export function decodedSizeRefusal(request: InboundRequest, params: WebhookParameters, body: ReceivedBody, held: HeldBytes, services: TriggerServices): Promise<InspectOutcome | null> | InspectOutcome | null {
  if (params.options.rawBody || params.options.binaryData) return null;
  const media = parseMediaType(request.headers['content-type']);
  const kind = bodyKind(media.type);
  if (kind === 'multipart') return null;
  let encoding;
  try { encoding = parseEncoding(request.headers['content-encoding']); } catch { return null; }
  // Sent as it is, the size received says it all; compressed, only the inflated bytes do.
  if (encoding === 'identity' && body.size <= MAX_DECODED_VALUE_BYTES / MOST_EXPANSION) return null;
  const measure = (raw: Buffer): InspectOutcome | null => {
    let bytes: Buffer;
    // Past the bound, the validator refused it while it streamed; a failure here is the decoder's to judge.
    try { bytes = inflateSync(raw, encoding, MAX_DECODED_VALUE_BYTES); } catch { return null; }
    if (bytes.length <= MAX_DECODED_VALUE_BYTES / MOST_EXPANSION) return null;
    let size: number;
    try {
      size = Buffer.byteLength(JSON.stringify(decodeInMemory(bytes, kind, media.params.charset)));
    } catch (error) {
      if (error instanceof IngressError) return { ok: false, answer: errorAnswer(error.code, error.message.charAt(0).toUpperCase() + error.message.slice(1)) };
      return null;
    }
    if (size <= MAX_DECODED_VALUE_BYTES) return null;
    return { ok: false, answer: errorAnswer('payload-too-large', `The request body decodes to ${size} bytes of JSON, more than the ${MAX_DECODED_VALUE_BYTES} a workflow's input holds; send it as a multipart file, or turn on the node's Raw Body`) };
  };
  // Held inline: copied and measured in one synchronous step, so at most one such copy exists at a time.
  if (body.inline) return measure(body.inline);
  return measuredStaged(body, held, services, request, measure);
}

/** A staged body read back whole and measured, holding room in `held` for it until then (busy when there is none). */
async function measuredStaged(body: ReceivedBody, held: HeldBytes, services: TriggerServices, request: InboundRequest, measure: (raw: Buffer) => InspectOutcome | null): Promise<InspectOutcome | null> {
  const share = heldShare(held);
  if (!share.take(body.size)) {
    services.logger.warn('bodies held in memory are at MAX_HELD_BODY_BYTES, request refused', { requestId: request.requestId, workflowId: request.workflowId, heldFor: 'decoded size', bytes: body.size });
    return { ok: false, answer: BUSY };
  }
  try {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of await body.readStaged!()) {
        size += (chunk as Buffer).length;
        if (size > body.size) throw new Error(`the staged body is larger than the ${body.size} bytes received`);
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      services.logger.error('a staged body could not be read back to measure what it decodes to', { requestId: request.requestId, error });
      return { ok: false, answer: BUSY }; // nothing accepted; the sender retries
    }
    return measure(Buffer.concat(chunks, size));
  } finally {
    share.release();
  }
}
