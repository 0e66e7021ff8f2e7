import { isUtf8 } from 'node:buffer';
import type { WarehouseAction } from './parameters';
import { jsonNestsDeeperThan, TOO_DEEP } from '../json-depth';

/**
 * The provider's post `{ PostId, Type, Data, PostedAt }` (SPEC §2.4). It is read, never rewritten: the
 * workflow gets the posted JSON text itself (big ERP ids keep every digit, "0", "" and null stay what they
 * were), with one field added in front, `duplicate`. Only Type and PostId are looked at.
 */
export class EnvelopeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EnvelopeError';
  }
}

export interface WarehousePost {
  /** The JSON text as posted (without a byte order mark). */
  text: string;
  /** `dc`/`rc` for the two event types, null for any other Type. */
  action: WarehouseAction | null;
  /** Type as posted (for logs), when it is a string. */
  type: string | null;
  /** PostId as text (a number is read as its digits), null when absent or empty. */
  postId: string | null;
  /**
   * The post has a top-level `duplicate` of its own. The receiver refuses it: the flag this service adds would
   * sit beside it in the text, and a JSON reader keeps the last of two, the post's.
   */
  claimsDuplicate: boolean;
}

const TYPES: Record<string, WarehouseAction> = { DC: 'dc', RC: 'rc' };

export function readWarehousePost(bytes: Buffer): WarehousePost {
  // JSON is UTF-8 (RFC 8259 §8.1). Decoding bytes that are not would put U+FFFD where they were and hand the
  // workflow text the provider never sent.
  if (!isUtf8(bytes)) throw new EnvelopeError('The request body is not valid UTF-8');
  let text = bytes.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  // The text itself goes to the workflow: nothing after this could take it deeper than this.
  if (jsonNestsDeeperThan(text)) throw new EnvelopeError(`The request body is ${TOO_DEEP}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new EnvelopeError('The request body is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new EnvelopeError('The request body is not a JSON object');
  const envelope = parsed as Record<string, unknown>;
  const type = typeof envelope.Type === 'string' ? envelope.Type : null;
  const rawId = envelope.PostId;
  const postId = (typeof rawId === 'string' && rawId.trim() !== '') ? rawId : typeof rawId === 'number' ? numericPostId(text, rawId) : null;
  return { text, action: type ? TYPES[type.trim().toUpperCase()] ?? null : null, type, postId, claimsDuplicate: Object.hasOwn(envelope, 'duplicate') };
}

/** JSON.parse with the source text of each primitive given to the reviver (Node 22+; TypeScript's lib lacks it). */
type ReviverWithSource = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;
const parseWithSource = JSON.parse as (text: string, reviver: ReviverWithSource) => unknown;

/**
 * A numeric PostId as text. A safe integer is exact as JSON.parse read it; a larger one is taken as written
 * (JSON.parse rounds it), from the source of the top-level member JSON.parse kept. Matching the text instead
 * could take a nested or repeated `"PostId"` whose digits round to the same double: a new post recorded under
 * another's id, and flagged a duplicate.
 */
function numericPostId(text: string, parsed: number): string {
  if (Number.isSafeInteger(parsed)) return String(parsed);
  const sources = new Map<unknown, string | undefined>();
  const root = parseWithSource(text, function (key, value, context) {
    if (key === 'PostId') sources.set(this, context?.source);
    return value;
  });
  return sources.get(root) ?? String(parsed);
}

/** The posted text with `"duplicate":…` as its first member. */
export function withDuplicateFlag(post: WarehousePost, duplicate: boolean): string {
  const open = post.text.indexOf('{');
  const rest = post.text.slice(open + 1);
  const empty = rest.trim() === '}';
  return `{"duplicate":${duplicate}${empty ? '' : ','}${rest}`;
}
