import { Router } from 'express';
import type { LogRecord } from '../../platform/log/event-log';
import type { AdminApiDeps } from '../deps';
import { AdminError } from '../errors';
import { refeed } from '../operations/refeed';
import { deadLetterSelector, deadLetterSummary, parsePosition, readStart, ReplayRequestError, type DeadLetterReplayRequest } from '../operations/replays';
import { onlyQueries, optionalString, queryString, queryWholeNumber, replayAnswer, replayDecision } from './request-fields';

/**
 * Dead letters: the newest first, filtered as `ingress dead-letters list` filters them (stage, workflow,
 * since), and their replay (a replay job: routes/replays.ts reads its progress).
 */
/** Positions one dead-letter replay may name: each is looked up in a set while the whole topic is read. */
const MAX_LETTERS = 10_000;

export function deadLetterRoutes(deps: AdminApiDeps): Router {
  const router = Router();

  router.get('/dead-letters', async (req, res) => {
    onlyQueries(req.query, ['stage', 'workflow', 'since', 'limit', 'withSource']);
    const stage = queryString(req.query, 'stage');
    const workflow = queryString(req.query, 'workflow');
    const sinceText = queryString(req.query, 'since');
    const limit = queryWholeNumber(req.query, 'limit', 100, 1, 1000);
    const withSource = queryString(req.query, 'withSource');
    if (withSource !== null && withSource !== 'true' && withSource !== 'false') throw new AdminError('invalid-request', 'withSource takes true or false');
    let since;
    try { since = sinceText === null ? null : parsePosition(sinceText, 'since', 'time'); } catch (error) {
      throw new AdminError('invalid-request', (error as Error).message);
    }
    let selected;
    try { selected = deadLetterSelector({ stage, workflow, letters: null }, { topics: deps.topics, codec: deps.codec, recordKey: deps.recordKey }); } catch (error) {
      throw new AdminError('invalid-request', (error as Error).message);
    }
    // The newest `limit`, read up to the topic's end as of now.
    const kept: Record<string, unknown>[] = [];
    let total = 0;
    const abort = new AbortController();
    req.once('close', () => { if (!res.writableFinished) abort.abort(); });
    const read = await refeed({
      log: deps.log, source: deps.topics.deadLetter, start: readStart(since), until: null, checkpoint: null, signal: abort.signal,
      quietMs: deps.listQuietMs, progress: { update() {}, finish() {} },
      select: (record: LogRecord) => {
        const letter = selected(record);
        if (letter) {
          total++;
          kept.push(deadLetterSummary(record, letter, deps.codec, withSource === 'true'));
          if (kept.length > limit) kept.shift();
        }
        return null;
      },
    }, {});
    // A list missing letters the log did not deliver in time would read as all of them.
    if (read.stalled) throw new AdminError('backend-unavailable', `${read.stalled}: the list would be incomplete; ask again`);
    res.json({ deadLetters: kept.reverse(), total, truncated: total > kept.length });
  });

  router.post('/dead-letters/replay', async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || Array.isArray(body)) throw new AdminError('invalid-request', 'The body must be a JSON object');
    const problems: string[] = [];
    const request: DeadLetterReplayRequest = {
      stage: optionalString(body, 'stage', problems),
      workflow: optionalString(body, 'workflow', problems),
      since: optionalString(body, 'since', problems),
      letters: null,
    };
    if (body.letters !== undefined && body.letters !== null) {
      if (!Array.isArray(body.letters) || body.letters.length === 0 || !body.letters.every((l) => typeof l === 'string')) problems.push('"letters" must be a non-empty array of dead-letter positions "<partition>/<offset>"');
      else if (body.letters.length > MAX_LETTERS) problems.push(`"letters" holds at most ${MAX_LETTERS} positions (${body.letters.length} given): replay them in several requests, or select by stage, workflow and since`);
      else request.letters = body.letters as string[];
    }
    // Applies when the request goes on with an unfinished job of the same filters whose last run it concerns.
    const decision = replayDecision(body, problems);
    for (const key of Object.keys(body)) if (!['stage', 'workflow', 'since', 'letters', 'unknownCopies'].includes(key)) problems.push(`"${key}" is not a field of a dead-letter replay (stage, workflow, since, letters, unknownCopies)`);
    if (problems.length) throw new AdminError('invalid-request', 'The dead-letter replay request is not valid', problems);
    try {
      replayAnswer(res, await deps.replays.startDeadLetters(request, decision));
    } catch (error) {
      if (error instanceof ReplayRequestError) throw new AdminError('invalid-request', error.message);
      throw error;
    }
  });
  return router;
}
