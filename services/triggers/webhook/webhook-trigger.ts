import { IngressError, errorAnswer, type Answer } from '../answers';
import type { TriggerPlugin } from '../trigger';
import { authenticate } from './authenticate';
import { webhookParameters } from './parameters';

/** Bodies up to this size are decoded in memory by the decoder; larger JSON is refused there. */
const MAX_JSON_BYTES = 64 * 1024 * 1024;

/** JSON media types; anything unrecognised falls back to JSON too (SPEC §2.2). */
export const isJsonType = (contentType: string | null) => {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  return type === '' || type === 'application/json' || type.endsWith('+json');
};

const parseJson = (bytes: Buffer): unknown => (bytes.length === 0 ? {} : JSON.parse(bytes.toString('utf8')));

export const webhookTrigger: TriggerPlugin = {
  nodeTypes: ['webhook'],

  kindOf: (node) => (webhookParameters(node).protocol === 'as2' ? 'as2' : 'webhook'),

  admit: (request, node, services) => authenticate(request, node, webhookParameters(node), services),

  async inspect(request, _node, body) {
    // The answer must say 400 for a body that is not JSON, so the cheap syntax check lives here, on
    // bodies already in memory; a larger body is checked by the decoder (and dead-lettered if bad).
    if (body.inline && isJsonType(request.headers['content-type'] ?? null)) {
      try { parseJson(body.inline); } catch { return errorAnswer('payload-parse-error', 'The request body is not valid JSON'); }
    }
    return null;
  },

  accepted(_request, node): Answer {
    const { options } = webhookParameters(node);
    if (options.noResponseBody) return { status: 200, headers: {}, body: '' };
    return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{}' };
  },

  async decode(received, _node, services) {
    const bytes = await services.readBody(received, MAX_JSON_BYTES);
    let value: unknown;
    try { value = parseJson(bytes); } catch (error) {
      throw new IngressError('payload-parse-error', 'The request body is not valid JSON', { cause: error });
    }
    return [{ value: JSON.stringify(value), files: [] }];
  },
};
