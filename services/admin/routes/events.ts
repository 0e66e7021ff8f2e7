import { Router } from 'express';
import { journalQueryProblem, requestJourney, searchJournal, type JournalSearch } from '../../platform/registry/journal';
import type { AdminApiDeps } from '../deps';
import { AdminError } from '../errors';
import { parseTime, quoted, TIME_FORMS } from '../operations/times';
import { onlyQueries, queryString } from './request-fields';

/**
 * The request journal (docs/request-journal.md): a request's journey, and the search `ingress events search`
 * runs. The query functions are the CLI's; a query the journal refuses (a bad limit, since after until) is the
 * caller's mistake, answered 400 with the journal's own words.
 */
export function eventRoutes(deps: AdminApiDeps): Router {
  const router = Router();
  const view = { traceUrlTemplate: deps.traceUrlTemplate ?? null };

  router.get('/events/:requestId', async (req, res) => {
    const requestId = req.params.requestId;
    const entries = await refusedAsInvalid(requestJourney(deps.registry.journal, requestId, view));
    if (entries.length === 0) throw new AdminError('not-found', `No journal entry for request ${requestId} (unknown, older than JOURNAL_RETENTION_DAYS, or not journaled yet)`);
    res.json({ requestId, entries });
  });

  router.get('/events', async (req, res) => {
    onlyQueries(req.query, ['workflow', 'messageId', 'postId', 'trackingId', 'since', 'until', 'limit']);
    const search: JournalSearch = {};
    const text = (name: string, field: 'workflowId' | 'messageId' | 'postId' | 'trackingId') => {
      const value = queryString(req.query, name);
      if (value !== null) search[field] = value;
    };
    text('workflow', 'workflowId');
    text('messageId', 'messageId');
    text('postId', 'postId');
    text('trackingId', 'trackingId');
    const since = timeParam(queryString(req.query, 'since'), 'since');
    const until = timeParam(queryString(req.query, 'until'), 'until');
    if (since !== null) search.since = since;
    if (until !== null) search.until = until;
    const limit = queryString(req.query, 'limit');
    if (limit !== null) {
      if (!/^\d+$/.test(limit)) throw new AdminError('invalid-request', 'limit takes a whole number');
      search.limit = Number(limit);
    }
    res.json({ events: await refusedAsInvalid(searchJournal(deps.registry.journal, search, view)) });
  });

  return router;
}

/** Epoch milliseconds, or an ISO time as `--since`/`--until` take it (times.ts, the CLI's parser). */
function timeParam(text: string | null, name: string): number | null {
  if (text === null) return null;
  // At most 15 digits: every instant a Date can name (8.64e15 ms) and no more; a longer run of digits was read
  // as a number no journal day reaches, or as Infinity.
  if (/^\d+$/.test(text)) {
    if (text.length > 15 || Number(text) > 8.64e15) throw new AdminError('invalid-request', `${name} in epoch milliseconds is at most 8640000000000000`);
    return Number(text);
  }
  const parsed = parseTime(text);
  if ('problem' in parsed) throw new AdminError('invalid-request', `${name} takes epoch milliseconds or an ISO time, ${TIME_FORMS}; ${quoted(text)} ${parsed.problem}`);
  return parsed.time;
}

async function refusedAsInvalid<T>(pending: Promise<T>): Promise<T> {
  try {
    return await pending;
  } catch (error) {
    const problem = journalQueryProblem(error);
    if (problem !== null) throw new AdminError('invalid-request', problem);
    throw error;
  }
}
