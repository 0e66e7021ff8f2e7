import { createHash } from 'node:crypto';
import { parseTraceParent } from '@opentelemetry/core';
import { RegistryError } from './registry';

/**
 * The request journal ("what happened to request X?", docs/request-journal.md): one entry per thing that
 * happened to a request, written by the journal stage from the pipeline's topics, kept in the registry for
 * JOURNAL_RETENTION_DAYS. This module holds the entry's shape, the store port the registry adapters
 * implement, and the query functions the CLI (and the management API) call.
 */

/**
 * What happened. The stage's source table (services/journal/sources.ts) decides which record makes which
 * kind; a new source (asynchronous MDN outcomes) adds kinds without changing anything here.
 */
export type JournalEntryKind =
  | 'received' | 'refused' | 'decoded' | 'duplicate' | 'execution-requested' | 'dead-lettered' | 'replayed' | 'as2-disposition'
  | (string & {});

export interface JournalEntry {
  /** Derived from the source record's position (entryId), so writing a redelivered record again changes nothing. */
  id: string;
  requestId: string;
  workflowId: string | null;
  kind: JournalEntryKind;
  /** Epoch milliseconds: when it happened (the request's arrival, the stage's output, the failure). */
  at: number;
  /** The W3C trace id the record carried, for a link to the trace; null when tracing was off. */
  traceId: string | null;
  /**
   * False when the trace was not sampled (OTEL_TRACES_SAMPLER): none of its spans was exported, so the id still
   * ties the entry to log lines but no link is given. Absent otherwise (entries written before it, too).
   */
  traceSampled?: false;
  /** `<topic>/<partition>/<offset>` of the record the entry was made from. */
  source: string;
  /** When the record came from a replay: the original's position (replay-marking.ts). */
  replayOf: string | null;
  /** Search keys, each `<name>:<value>` (journalKey): an AS2 Message-Id, a warehouse PostId, a logistics TrackingID. */
  keys: string[];
  /** What the kind says beyond the common fields (counts, ids, codes, a disposition). JSON only. */
  detail: Record<string, unknown>;
}

/** The partner identifiers an entry can be found by. */
export const JOURNAL_KEY_NAMES = ['messageId', 'postId', 'trackingId'] as const;
export type JournalKeyName = (typeof JOURNAL_KEY_NAMES)[number];

/** A search key. A Message-Id is kept without its angle brackets (partners quote it both ways): either spelling finds it. */
export function journalKey(name: JournalKeyName, value: string): string {
  return `${name}:${name === 'messageId' ? value.trim().replace(/^<(.*)>$/s, '$1') : value}`;
}

/** A search: every given criterion must hold. Newest first, at most `limit`. */
export interface JournalQuery {
  requestId?: string;
  workflowId?: string;
  /** One search key (journalKey). */
  key?: string;
  /** Epoch ms, inclusive. */
  since?: number;
  /** Epoch ms, exclusive: the `at` of a page's last entry asks for the next page. */
  until?: number;
  limit: number;
}

export interface JournalStore {
  /** Insert or replace, by id. Entries of one call may be written together (one batch where the backend allows). */
  upsert(entries: JournalEntry[]): Promise<void>;
  /** Every entry of the request, oldest first. */
  request(requestId: string): Promise<JournalEntry[]>;
  /** The entries that match, newest first, at most `query.limit`. */
  search(query: JournalQuery): Promise<JournalEntry[]>;
  /**
   * Forget entries from before `before` (epoch ms), in whole days; returns how many days (file) were dropped.
   * Cosmos DB expires entries itself (TTL) and returns 0.
   */
  prune(before: number): Promise<number>;
  /** Release what the store holds open (the file adapter's day files); the registry's close calls it. */
  close?(): Promise<void>;
}

export const DEFAULT_JOURNAL_RETENTION_DAYS = 30;
export const MAX_JOURNAL_LIMIT = 1000;
/** Longest entry id: a Cosmos id is at most 255 characters (longer ids are hashed, entryId). */
const MAX_ENTRY_ID = 200;
/** Longest value a query compares (ids and partner keys are far shorter). */
const MAX_QUERY_VALUE = 1024;

/**
 * The entry made from one record (the `n`th when a record makes several): its topic, partition and offset say
 * which, so a redelivery after a crash upserts the same ids. An id too long for Cosmos is hashed.
 */
export function entryId(topic: string, partition: number, offset: string, n: number): string {
  const plain = `${topic}.${partition}.${offset}.${n}`.replace(/[^A-Za-z0-9._-]/g, '_');
  return plain.length <= MAX_ENTRY_ID ? plain : `h.${createHash('sha256').update(`${topic}\u0000${partition}\u0000${offset}\u0000${n}`).digest('hex')}`;
}

/** The trace id of a W3C traceparent, null where the W3C propagator would take no parent from it (absent, malformed, version ff, zero ids, more fields after a version 00). */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  return traceOf(traceparent)?.traceId ?? null;
}

/** The trace id of a W3C traceparent and whether its trace was sampled (trace-flags bit 0); null as traceIdOf. */
export function traceOf(traceparent: string | null | undefined): { traceId: string; sampled: boolean } | null {
  // The propagator's own parse: an entry never links to a trace that no stage's span could have joined.
  const parsed = traceparent ? parseTraceParent(traceparent) : null;
  return parsed && { traceId: parsed.traceId, sampled: (parsed.traceFlags & 1) === 1 };
}

/** Checks a query before any backend sees it: a precise error for each bad part. */
export function checkedQuery(query: JournalQuery): JournalQuery {
  const bad = (what: string) => new RegistryError(`journal query: ${what}`, 'invalid-document');
  if (!Number.isSafeInteger(query.limit) || query.limit < 1 || query.limit > MAX_JOURNAL_LIMIT) throw bad(`limit must be a whole number from 1 to ${MAX_JOURNAL_LIMIT}`);
  for (const name of ['requestId', 'workflowId', 'key'] as const) {
    const value = query[name];
    if (value !== undefined && (typeof value !== 'string' || value.length === 0 || value.length > MAX_QUERY_VALUE)) throw bad(`${name} must be a non-empty string of at most ${MAX_QUERY_VALUE} characters`);
  }
  for (const name of ['since', 'until'] as const) {
    const value = query[name];
    if (value !== undefined && !Number.isSafeInteger(value)) throw bad(`${name} must be epoch milliseconds`);
  }
  if (query.since !== undefined && query.until !== undefined && query.since >= query.until) throw bad('since must be before until');
  return query;
}

/** Whether an entry meets every criterion of the query (the file adapter filters with it). */
export function matchesQuery(entry: JournalEntry, query: JournalQuery): boolean {
  if (query.requestId !== undefined && entry.requestId !== query.requestId) return false;
  if (query.workflowId !== undefined && entry.workflowId !== query.workflowId) return false;
  if (query.key !== undefined && !entry.keys.includes(query.key)) return false;
  if (query.since !== undefined && entry.at < query.since) return false;
  if (query.until !== undefined && entry.at >= query.until) return false;
  return true;
}

/**
 * Where a kind comes in a journey, for entries of one millisecond (a fast pipeline decodes and dispatches
 * within one): the order the pipeline makes them in. Kinds not listed (a new source's) come last.
 */
const PIPELINE_ORDER: Record<string, number> = { received: 0, refused: 0, 'as2-disposition': 1, replayed: 2, duplicate: 3, decoded: 3, 'execution-requested': 4, 'dead-lettered': 5 };
const rankOf = (kind: string) => PIPELINE_ORDER[kind] ?? 6;

/** Oldest first; entries of one millisecond in pipeline order, then by id, so every backend returns one order. */
export function oldestFirst(a: JournalEntry, b: JournalEntry): number {
  return a.at - b.at || rankOf(a.kind) - rankOf(b.kind) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/** Newest first: the reverse of oldestFirst. */
export function newestFirst(a: JournalEntry, b: JournalEntry): number {
  return oldestFirst(b, a);
}

/** What an operator searches by, as the CLI and the management API take it. */
export interface JournalSearch {
  workflowId?: string;
  messageId?: string;
  postId?: string;
  trackingId?: string;
  since?: number;
  until?: number;
  limit?: number;
}

export const DEFAULT_SEARCH_LIMIT = 50;

/** An entry as shown to an operator: ISO time, and a link to its trace when a template is configured and the trace was sampled. */
export type JournalView = Omit<JournalEntry, 'at'> & { at: string; traceUrl?: string };

export interface JournalViewOptions {
  /** A URL with `{traceId}` (JOURNAL_TRACE_URL), e.g. `http://jaeger:16686/trace/{traceId}`. */
  traceUrlTemplate?: string | null;
}

export function journalView(entry: JournalEntry, options: JournalViewOptions = {}): JournalView {
  const view: JournalView = { ...entry, at: new Date(entry.at).toISOString() };
  if (options.traceUrlTemplate && entry.traceId && entry.traceSampled !== false) view.traceUrl = options.traceUrlTemplate.split('{traceId}').join(entry.traceId);
  return view;
}

/** `events get`: the journey of one request, oldest first. */
export async function requestJourney(store: JournalStore, requestId: string, options: JournalViewOptions = {}): Promise<JournalView[]> {
  if (typeof requestId !== 'string' || requestId.length === 0 || requestId.length > MAX_QUERY_VALUE) throw new RegistryError(`journal query: a request id is a non-empty string of at most ${MAX_QUERY_VALUE} characters`, 'invalid-document');
  return (await store.request(requestId)).sort(oldestFirst).map((e) => journalView(e, options));
}

/**
 * `events search`: at most one partner key may be given (an entry carries the one its request had); workflow
 * and the time range narrow any search.
 */
export async function searchJournal(store: JournalStore, search: JournalSearch, options: JournalViewOptions = {}): Promise<JournalView[]> {
  const keys = JOURNAL_KEY_NAMES.filter((name) => search[name] !== undefined).map((name) => journalKey(name, search[name]!));
  if (keys.length > 1) throw new RegistryError('journal query: give at most one of messageId, postId, trackingId', 'invalid-document');
  const query = checkedQuery({
    limit: search.limit ?? DEFAULT_SEARCH_LIMIT,
    ...(search.workflowId !== undefined ? { workflowId: search.workflowId } : {}),
    ...(keys.length ? { key: keys[0] } : {}),
    ...(search.since !== undefined ? { since: search.since } : {}),
    ...(search.until !== undefined ? { until: search.until } : {}),
  });
  return (await store.search(query)).map((e) => journalView(e, options));
}

/** What is wrong with a query the registry refused, without the "journal query:" prefix; null for any other error. */
export function journalQueryProblem(error: unknown): string | null {
  if (!(error instanceof RegistryError) || error.code !== 'invalid-document') return null;
  return error.message.replace(/^journal query: /, '');
}
