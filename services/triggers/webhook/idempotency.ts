import { createHash } from 'node:crypto';
import type { WorkflowNode } from '../../platform/registry/documents';
import { isSecretHeader } from '../../platform/logger/redact';
import type { Idempotency, InboundRequest, Inspection } from '../trigger';
import { HEADER_NAME } from '../../platform/registry/document-checks';
import { isRawJson } from '../json-numbers';

/**
 * A webhook node's `idempotencyKey` option (DESIGN.md §5): where a request's idempotency key comes from, and
 * for how long a later request with the same key starts nothing. Read from `parameters.options` like the
 * node's other options, or from `parameters` itself.
 *   {"header":"Idempotency-Key"}      a header's value
 *   {"standardWebhooks":true}         the `webhook-id` header of a Standard Webhooks sender
 *   {"json":"order.id"}               a value in a JSON body the receiver holds (dotted path, numbers index arrays)
 * The receiver only records the key; the decoder decides (services/decoder/idempotency-ledger.ts).
 */
export type KeySource = { header: string } | { json: string[] } | { standardWebhooks: true };

export const DEFAULT_WINDOW_HOURS = 24;
/** A year: beyond that a window is a mistake, and the decoder's memory of keys would grow without end. */
const MOST_WINDOW_HOURS = 24 * 365;
/** Keys longer than this are kept as their SHA-256, so a partner cannot make records or memory grow with them. */
const LONGEST_KEY = 200;

interface Parsed { source: KeySource; windowHours: number }
const parsed = new WeakMap<WorkflowNode, Parsed | null>();

function optionsOf(node: WorkflowNode): Record<string, unknown> {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const o = (typeof p.options === 'object' && p.options !== null ? p.options : {}) as Record<string, unknown>;
  return { idempotencyKey: o.idempotencyKey ?? p.idempotencyKey, idempotencyWindowHours: o.idempotencyWindowHours ?? p.idempotencyWindowHours };
}

function sourceOf(option: unknown): KeySource | null {
  if (typeof option !== 'object' || option === null) return null;
  const o = option as Record<string, unknown>;
  if (typeof o.header === 'string' && HEADER_NAME.test(o.header)) return { header: o.header.toLowerCase() };
  if (o.standardWebhooks === true) return { standardWebhooks: true };
  if (typeof o.json === 'string' && o.json.trim() !== '') return { json: o.json.trim().replace(/^\$json\./, '').split('.') };
  return null;
}

function optionOf(node: WorkflowNode): Parsed | null {
  let hit = parsed.get(node);
  if (hit !== undefined) return hit;
  const { idempotencyKey, idempotencyWindowHours } = optionsOf(node);
  const source = sourceOf(idempotencyKey);
  const hours = typeof idempotencyWindowHours === 'number' && idempotencyWindowHours > 0 && idempotencyWindowHours <= MOST_WINDOW_HOURS ? idempotencyWindowHours : DEFAULT_WINDOW_HOURS;
  hit = source ? { source, windowHours: hours } : null;
  parsed.set(node, hit);
  return hit;
}

/** Whether the node's key is read from the parsed body, so the receiver must build `$json` for it. */
export function needsJsonValue(node: WorkflowNode): boolean {
  const option = optionOf(node);
  return option !== null && 'json' in option.source;
}

function valueAt(json: unknown, path: string[]): string | null {
  let at: unknown = json;
  for (const step of path) {
    if (typeof at !== 'object' || at === null || isRawJson(at)) return null;
    at = Array.isArray(at) ? (/^\d+$/.test(step) ? at[Number(step)] : undefined) : (at as Record<string, unknown>)[step];
  }
  if (typeof at === 'string') return at;
  if (typeof at === 'number' && Number.isFinite(at)) return String(at);
  if (isRawJson(at)) return at.rawJSON; // a number a double would change, as written (json-numbers.ts)
  return null; // objects, arrays, booleans and null name nothing a sender would use as a key
}

export function keyOf(source: KeySource, request: InboundRequest, inspection: Inspection): string | null {
  const raw = 'header' in source ? request.headers[source.header]
    : 'standardWebhooks' in source ? request.headers['webhook-id']
      : valueAt(inspection.json, source.json);
  const key = raw?.trim();
  if (!key) return null;
  return key.length <= LONGEST_KEY ? key : `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

const made = new WeakMap<WorkflowNode, Idempotency | null>();

/** Asked on every accept: made once per node document (a changed workflow is a new document). */
export function webhookIdempotency(node: WorkflowNode): Idempotency | null {
  let idempotency = made.get(node);
  if (idempotency !== undefined) return idempotency;
  const option = optionOf(node);
  idempotency = option ? { windowMs: option.windowHours * 3_600_000, keyOf: (request, _body, inspection) => keyOf(option.source, request, inspection) } : null;
  made.set(node, idempotency);
  return idempotency;
}

/** Problems with the options, for `workflows put`. */
export function idempotencyProblems(node: WorkflowNode, at: string): string[] {
  const { idempotencyKey, idempotencyWindowHours } = optionsOf(node);
  const problems: string[] = [];
  if (idempotencyKey !== undefined && sourceOf(idempotencyKey) === null) {
    problems.push(`${at}.parameters.options.idempotencyKey must be {"header":"<header name>"}, {"standardWebhooks":true} or {"json":"<dotted.path>"}`);
  }
  if (idempotencyWindowHours !== undefined && !(typeof idempotencyWindowHours === 'number' && idempotencyWindowHours > 0 && idempotencyWindowHours <= MOST_WINDOW_HOURS)) {
    problems.push(`${at}.parameters.options.idempotencyWindowHours must be a number of hours above 0 and at most ${MOST_WINDOW_HOURS}`);
  }
  if (idempotencyWindowHours !== undefined && idempotencyKey === undefined) problems.push(`${at}.parameters.options.idempotencyWindowHours needs idempotencyKey`);
  // The key is kept in the received record as it came: a header that carries a credential is redacted there, and must not leak through the key.
  const source = sourceOf(idempotencyKey);
  if (source && 'header' in source && isSecretHeader(source.header)) {
    problems.push(`${at}.parameters.options.idempotencyKey.header ${JSON.stringify(source.header)} carries a credential (it is redacted from records), so it cannot be the idempotency key`);
  }
  return problems;
}

/** For a node another trigger serves (Protocol AS2): the option would do nothing there, so it is refused. */
export function idempotencyUnsupported(node: WorkflowNode, at: string): string[] {
  const { idempotencyKey, idempotencyWindowHours } = optionsOf(node);
  return idempotencyKey !== undefined || idempotencyWindowHours !== undefined
    ? [`${at}.parameters.options.idempotencyKey is for HTTP webhooks; an AS2 node does not take it`]
    : [];
}
