import { createHash } from 'node:crypto';
import type { Request } from 'express';
import { AdminError } from '../errors';

/**
 * Optimistic concurrency for the documents of the management API (RFC 9110 §8.8.3, §13.1): a read of a
 * workflow or a credential carries an ETag; a write may send it back in If-Match (only over that version) or
 * send If-None-Match: * (only where none exists yet). The condition is checked against the document the write
 * then replaces through the registry's compare-and-set (`putIf`), so it still holds when the write lands.
 */

/** Sorted keys: the tag of a document is the same whatever order a backend gives its properties in. */
const sortedKeys = (_key: string, value: unknown): unknown => (value && typeof value === 'object' && !Array.isArray(value)
  ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  : value);

/** A strong entity tag of a stored document: a digest of its JSON (for a credential, of its sealed form: no secret). */
export function etagOf(document: unknown): string {
  return `"${createHash('sha256').update(JSON.stringify(document, sortedKeys)).digest('base64url').slice(0, 27)}"`;
}

/** `*` or a comma-separated list of entity tags, weak ones (W/"…") included; null when it is neither. */
function entityTags(header: string): string[] | '*' | null {
  if (header.trim() === '*') return '*';
  const tags = header.split(',').map((t) => t.trim());
  return tags.every((t) => /^(W\/)?"[\x21\x23-\x7e\x80-\xff]*"$/.test(t)) ? tags : null;
}

/**
 * Refuse the write (412 precondition-failed) when If-Match or If-None-Match does not hold for `stored` (null:
 * none is stored), and a malformed one (400). If-Match compares strongly (a weak tag never matches), as RFC
 * 9110 says; If-None-Match weakly.
 */
export function checkPreconditions(req: Request, stored: object | null, what: string): void {
  const ifMatch = req.get('if-match');
  const ifNoneMatch = req.get('if-none-match');
  if (ifMatch !== undefined) {
    const tags = entityTags(ifMatch);
    if (tags === null) throw new AdminError('invalid-request', 'If-Match takes * or a list of entity tags ("…")');
    const holds = stored !== null && (tags === '*' || tags.includes(etagOf(stored)));
    if (!holds) throw new AdminError('precondition-failed', stored === null ? `${what} does not exist (If-Match)` : `${what} has changed since the version If-Match names; read it again`, undefined, stored ? { ETag: etagOf(stored) } : {});
  }
  if (ifNoneMatch !== undefined) {
    const tags = entityTags(ifNoneMatch);
    if (tags === null) throw new AdminError('invalid-request', 'If-None-Match takes * or a list of entity tags ("…")');
    const current = stored === null ? null : etagOf(stored);
    const matches = current !== null && (tags === '*' || tags.some((t) => t.replace(/^W\//, '') === current));
    if (matches) throw new AdminError('precondition-failed', tags === '*' ? `${what} exists already (If-None-Match: *)` : `${what} is still the version If-None-Match names`, undefined, { ETag: current! });
  }
}
