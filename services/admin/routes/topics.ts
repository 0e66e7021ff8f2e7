import { Router } from 'express';
import type { ReadStart } from '../../platform/log/event-log';
import type { AdminApiDeps } from '../deps';
import { AdminError } from '../errors';
import { recordToJson } from '../operations/records-json';
import { onlyQueries, queryString } from './request-fields';

/**
 * The pipeline's topics and a live tail of one as Server-Sent Events (`ingress tail`): each record is one
 * `record` event whose data is one JSON object (Avro decoded, `input` parsed), with the record's place as
 * the event id. The stream ends when the client goes (its reader is aborted, the Kafka reader leaves).
 */
export function topicRoutes(deps: AdminApiDeps): Router {
  const router = Router();
  const known = () => [...new Set([deps.topics.received, deps.topics.decoded, deps.topics.executions, ...deps.executionQueues, deps.topics.deadLetter])];

  router.get('/topics', (_req, res) => { res.json({ topics: known() }); });

  router.get('/topics/:topic/tail', async (req, res) => {
    const topic = req.params.topic;
    if (!known().includes(topic)) throw new AdminError('not-found', `No pipeline topic ${JSON.stringify(topic)}; GET /api/v1/topics lists them`);
    onlyQueries(req.query, ['from']);
    const from = queryString(req.query, 'from') ?? 'end';
    if (from !== 'end' && from !== 'beginning') throw new AdminError('invalid-request', 'from takes end (new records only, the default) or beginning');
    const start: ReadStart = { from };
    const abort = new AbortController();
    const gone = () => abort.abort();
    res.once('close', gone);
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.write(`: tail of ${topic}\n\n`);
    const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), deps.tailKeepAliveMs ?? 15_000);
    let sent = 0;
    try {
      for await (const record of deps.log.read(topic, { start, signal: abort.signal })) {
        sent++;
        const ok = res.write(`event: record\nid: ${record.partition}/${record.offset}\ndata: ${recordToJson(record, deps.codec)}\n\n`);
        if (!ok && !abort.signal.aborted) await new Promise<void>((resolve) => { res.once('drain', resolve); abort.signal.addEventListener('abort', () => resolve(), { once: true }); });
        if (abort.signal.aborted) break;
      }
    } catch (error) {
      // Headers are out: say so in the stream, then end it.
      if (!abort.signal.aborted) {
        deps.logger.warn('admin tail ended by a log error', { topic, error: (error as Error).message });
        res.write(`event: error\ndata: ${JSON.stringify({ error: 'backend-unavailable', message: 'The log could not be read; reconnect to go on' })}\n\n`);
      }
    } finally {
      clearInterval(keepAlive);
      res.off('close', gone);
      res.end();
      // The reader is closed by now (the Kafka reader has left its throwaway group).
      deps.logger.debug('admin tail ended', { topic, records: sent, clientGone: abort.signal.aborted });
    }
  });
  return router;
}
