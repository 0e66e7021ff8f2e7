import { Router } from 'express';
import type { AdminApiDeps } from '../deps';
import { AdminError } from '../errors';
import { ReplayRequestError, type RangeReplayRequest } from '../operations/replays';
import { optionalString, replayAnswer, replayDecision } from './request-fields';

/**
 * Replays run by the service (replay-jobs.ts): start a range replay (`ingress replay TOPIC --from --to
 * --workflow`), read every replay's progress (dead-letter replays included), cancel and resume.
 */
export function replayRoutes(deps: AdminApiDeps): Router {
  const router = Router();
  const job = async (id: string) => {
    await deps.replays.listed();
    const found = deps.replays.get(id);
    if (!found) throw new AdminError('not-found', `No replay ${JSON.stringify(id)}`);
    return found;
  };

  router.get('/replays', async (_req, res) => {
    await deps.replays.listed();
    res.json({ replays: deps.replays.list() });
  });

  router.post('/replays', async (req, res) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || Array.isArray(body)) throw new AdminError('invalid-request', 'The body must be a JSON object');
    const problems: string[] = [];
    const position = (name: string) => {
      const v = body[name];
      if (typeof v !== 'number') return optionalString(body, name, problems);
      if (Number.isSafeInteger(v) && v >= 0) return String(v);
      problems.push(`"${name}" must be an offset (a whole number from 0) or an ISO time`);
      return null;
    };
    // Kept as given here; the replay jobs normalise it (replays.ts normalRangeRequest) for its id and checkpoint.
    const request: RangeReplayRequest = { topic: optionalString(body, 'topic', problems) ?? '', from: position('from') ?? '', to: position('to'), workflow: optionalString(body, 'workflow', problems) };
    const decision = replayDecision(body, problems);
    if (!request.topic) problems.push('"topic" is required: the stage input topic to replay');
    if (body.from === undefined || body.from === null) problems.push('"from" is required: an offset or an ISO time');
    for (const key of Object.keys(body)) if (!['topic', 'from', 'to', 'workflow', 'unknownCopies'].includes(key)) problems.push(`"${key}" is not a field of a replay (topic, from, to, workflow, unknownCopies)`);
    if (problems.length) throw new AdminError('invalid-request', 'The replay request is not valid', problems);
    try {
      replayAnswer(res, await deps.replays.startRange(request, decision));
    } catch (error) {
      if (error instanceof ReplayRequestError) throw new AdminError('invalid-request', error.message);
      throw error;
    }
  });

  router.get('/replays/:id', async (req, res) => { res.json(await job(req.params.id)); });

  router.post('/replays/:id/cancel', async (req, res) => {
    await job(req.params.id);
    res.json(await deps.replays.cancel(req.params.id));
  });

  router.post('/replays/:id/resume', async (req, res) => {
    // No body, or one deciding the copies a retention hid from the look (refeed.ts CopiesUnknown).
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body !== 'object' || Array.isArray(body)) throw new AdminError('invalid-request', 'The body must be a JSON object');
    const problems: string[] = [];
    const decision = replayDecision(body, problems);
    for (const key of Object.keys(body)) if (key !== 'unknownCopies') problems.push(`"${key}" is not a field of a resume (unknownCopies)`);
    if (problems.length) throw new AdminError('invalid-request', 'The resume request is not valid', problems);
    await job(req.params.id);
    replayAnswer(res, (await deps.replays.resume(req.params.id, decision))!);
  });
  return router;
}
