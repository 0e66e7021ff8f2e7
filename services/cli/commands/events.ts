import { journalQueryProblem, MAX_JOURNAL_LIMIT, requestJourney, searchJournal, type JournalSearch } from '../../platform/registry/journal';
import { allowOnly, numberFlag, positionFlag, stringFlag, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';

export const EVENTS_USAGE = 'ingress events get REQUEST_ID | events search [--workflow ID] [--message-id ID] [--post-id ID] [--tracking-id ID] [--since ISO-TIME] [--until ISO-TIME] [--limit N]';

const SEARCH_FLAGS = ['workflow', 'message-id', 'post-id', 'tracking-id', 'since', 'until', 'limit'];

/**
 * The request journal (docs/request-journal.md): `get` prints a request's journey, oldest first; `search`
 * prints the entries that match, newest first, at most --limit (50). One JSON line per entry, with `traceUrl`
 * when JOURNAL_TRACE_URL is set. The next page of a search: the same search with --until the last line's `at`.
 */
export async function eventsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const [verb, ...rest] = args.positionals;
  const view = { traceUrlTemplate: ctx.config.journal.traceUrl };
  if (verb === 'get') {
    allowOnly(args, []);
    if (rest.length !== 1 || rest[0] === '') throw new UsageError(`usage: ${EVENTS_USAGE}`);
    const registry = await ctx.openRegistry();
    try {
      const journey = await asUsage(requestJourney(registry.journal, rest[0], view));
      for (const entry of journey) ctx.out(JSON.stringify(entry));
      if (journey.length === 0) ctx.err(`no journal entry for request ${rest[0]} (unknown, older than JOURNAL_RETENTION_DAYS, or not journaled yet)`);
      return journey.length === 0 ? 1 : 0;
    } finally {
      await registry.close();
    }
  }
  if (verb === 'search') {
    allowOnly(args, SEARCH_FLAGS);
    if (rest.length > 0) throw new UsageError(`usage: ${EVENTS_USAGE}`);
    const search: JournalSearch = {};
    const text = (flag: string, field: 'workflowId' | 'messageId' | 'postId' | 'trackingId') => {
      const value = stringFlag(args, flag);
      if (value !== null) search[field] = value;
    };
    text('workflow', 'workflowId');
    text('message-id', 'messageId');
    text('post-id', 'postId');
    text('tracking-id', 'trackingId');
    // Checked here as well as by the journal, whose words are the API's fields (messageId, since), not the flags typed.
    if ([search.messageId, search.postId, search.trackingId].filter((v) => v !== undefined).length > 1) {
      throw new UsageError('give at most one of --message-id, --post-id, --tracking-id');
    }
    const since = positionFlag(args, 'since', 'time');
    const until = positionFlag(args, 'until', 'time');
    if (since && 'time' in since) search.since = since.time;
    if (until && 'time' in until) search.until = until.time;
    if (search.since !== undefined && search.until !== undefined && search.since >= search.until) throw new UsageError('--since must be before --until');
    const limit = numberFlag(args, 'limit', 1, MAX_JOURNAL_LIMIT);
    if (limit !== null) search.limit = limit;
    const registry = await ctx.openRegistry();
    try {
      for (const entry of await asUsage(searchJournal(registry.journal, search, view))) ctx.out(JSON.stringify(entry));
      return 0;
    } finally {
      await registry.close();
    }
  }
  throw new UsageError(`usage: ${EVENTS_USAGE}`);
}

/** A query the journal refuses (a bad limit, since after until) is the caller's mistake: a usage error. */
async function asUsage<T>(pending: Promise<T>): Promise<T> {
  try {
    return await pending;
  } catch (error) {
    const problem = journalQueryProblem(error);
    if (problem !== null) throw new UsageError(problem);
    throw error;
  }
}
