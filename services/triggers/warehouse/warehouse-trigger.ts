import { createHash } from 'node:crypto';
import { BUSY, errorAnswer, IngressError, type Answer } from '../answers';
import { checkHeaderAuth, hasContentEncoding } from '../header-auth';
import type { TriggerPlugin } from '../trigger';
import { wholeBody } from '../whole-body';
import { DEFAULT_HELD_BODY_BYTES, heldBytes, type HeldBytes } from '../held-bytes';
import { EnvelopeError, readWarehousePost, withDuplicateFlag } from './envelope';
import { MAX_RECORD_BYTES } from '../../platform/log/event-log';
import { warehouseParameters, warehouseProblems } from './parameters';
import { isRepeat } from '../first-request';

/**
 * The warehouse-provider trigger (SPEC §2.4): a JSON post `{ PostId, Type, Data, PostedAt }`.
 *
 * Receiver: optional Basic/Header Auth; the body must be a JSON object (else 400, nothing accepted).
 * Every post that is a JSON object is accepted, whatever its Type, so a replay after selecting
 * another action can start it; the answer is `{}`.
 * Decoder: a selected Type (DC → `dc`, RC → `rc`) gives one item, the post as sent plus `duplicate`;
 * another Type, or one not selected, starts nothing and is logged.
 */
export interface WarehouseLimits {
  /** Largest post held in memory to be checked and decoded. */
  maxPostBytes: number;
}

/**
 * The output is the post as sent (plus `duplicate`), in one decoded record: a larger post could be
 * answered 200 and then fail in the decoder for its size, so it is refused at the door instead.
 */
export const DEFAULT_WAREHOUSE_LIMITS: WarehouseLimits = { maxPostBytes: MAX_RECORD_BYTES - 64 * 1024 };

/** Where the first request of a PostId is recorded, per workflow (the PostId hashed: it is partner text). */
const postIdMarker = (workflowId: string, postId: string) => `warehouse/${workflowId}/post-ids/${createHash('sha256').update(postId, 'utf8').digest('hex')}`;

const ACCEPTED: Answer = { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: '{}' };

export function createWarehouseTrigger(limits: WarehouseLimits = DEFAULT_WAREHOUSE_LIMITS, held: HeldBytes = heldBytes(DEFAULT_HELD_BODY_BYTES)): TriggerPlugin {
  const whole = wholeBody(limits.maxPostBytes, () => errorAnswer('payload-too-large', `The post is larger than ${limits.maxPostBytes} bytes`), held);

  return {
    nodeTypes: ['warehouseTrigger'],
    kindOf: () => 'warehouse',

    async admit(request, node, services) {
      if (hasContentEncoding(request)) return { ok: false, answer: errorAnswer('unsupported-media', 'Content-Encoding is not supported for warehouse posts') };
      const outcome = await checkHeaderAuth(request, node, warehouseParameters(node).authentication, services);
      return outcome.ok ? outcome : { ok: false, answer: errorAnswer(outcome.code) };
    },

    validator: (request) => whole.validator(request),

    async inspect(request, _node, body) {
      const bytes = whole.take(request, body);
      if (bytes === 'busy') return { ok: false, answer: BUSY };
      if (!bytes) return { ok: false, answer: errorAnswer('internal-error') };
      try {
        if (readWarehousePost(bytes).claimsDuplicate) {
          return { ok: false, answer: errorAnswer('payload-parse-error', 'The post has a top-level "duplicate" member: this service sets it, to say whether the post repeats an earlier PostId') };
        }
        return { ok: true, inspection: {} };
      } catch (error) {
        if (error instanceof EnvelopeError) return { ok: false, answer: errorAnswer('payload-parse-error', error.message) };
        throw error;
      }
    },

    accepted: () => ACCEPTED,

    async decode(received, node, services) {
      const params = warehouseParameters(node);
      let post;
      try {
        post = readWarehousePost(await services.readBody(received, limits.maxPostBytes));
      } catch (error) {
        if (error instanceof EnvelopeError) throw new IngressError('payload-parse-error', error.message);
        throw error;
      }
      const context = { workflowId: received.workflowId, requestId: received.requestId, postId: post.postId, type: post.type };
      if (!post.action) { services.logger.info('warehouse post skipped: unknown Type', context); return []; }
      if (!params.actions.has(post.action)) { services.logger.info('warehouse post skipped: Type not selected', context); return []; }
      const duplicate = post.postId !== null && await isRepeat(services.store, postIdMarker(received.workflowId, post.postId), received.requestId);
      if (duplicate) services.logger.info('warehouse post is a re-post of an earlier PostId', context);
      return [{ value: withDuplicateFlag(post, duplicate), files: [], sourceIndex: 0 }];
    },

    validateNode: warehouseProblems,
  };
}
