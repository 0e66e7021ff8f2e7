import express, { type ErrorRequestHandler, type Express, type NextFunction, type Request, type Response, type Router } from 'express';
import { EventLogError } from '../platform/log/event-log';
import { RegistryError } from '../platform/registry/registry';
import { TOO_DEEP } from '../triggers/json-depth';
import { checkJsonText } from '../triggers/webhook/json-syntax';
import { requireAdminToken, type AdminCaller } from './auth';
import { consoleRoutes } from './console';
import type { AdminApiDeps } from './deps';
import { ADMIN_ERRORS, AdminError, errorBody, type AdminErrorCode } from './errors';
import { LOCAL_CLI_TOKEN_NAME } from './local-access';
import { openApiDocument } from './openapi';
import { CheckpointInUse } from './operations/refeed';
import { ReplayLedgerUnreadable } from './operations/replay-ledger';
import { ReplayConflict, ReplayJobUnreadable, ReplayRunningElsewhere, ReplayStoreError } from './replay-jobs';
import { credentialRoutes } from './routes/credentials';
import { deadLetterRoutes } from './routes/dead-letters';
import { eventRoutes } from './routes/events';
import { replayRoutes } from './routes/replays';
import { topicRoutes } from './routes/topics';
import { workflowRoutes } from './routes/workflows';

/**
 * The management API (docs/management-api.md): express on the admin port, every route under /api/v1, JSON in
 * and out, bearer admin tokens (auth.ts). One router module per resource under routes/; a new resource
 * is one more entry in RESOURCES.
 *
 * Whatever goes wrong answers the JSON error shape of errors.ts: unknown routes, bad JSON, bodies over the
 * limit, a backend that does not answer. Express's HTML error pages never reach a client.
 */
export const API_PREFIX = '/api/v1';

type Resource = (deps: AdminApiDeps) => Router;
const RESOURCES: Resource[] = [
  workflowRoutes,
  credentialRoutes,
  deadLetterRoutes,
  replayRoutes,
  topicRoutes,
  eventRoutes,
  // Who the token is: the console disables what the scope does not allow, and says why.
  () => express.Router().get('/whoami', (_req, res) => { res.json(res.locals.caller as AdminCaller); }),
  () => express.Router().get('/openapi.json', (_req, res) => { res.json(openApiDocument()); }),
];

export function createAdminApi(deps: AdminApiDeps): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // The console's page holds no data, so it needs no token; what it shows comes from /api with one.
  app.use('/console', consoleRoutes());
  app.use('/api', (_req, res, next) => { res.set('cache-control', 'no-store'); next(); });
  // Before authentication, so refused calls are logged too (without a caller).
  app.use('/api', accessLog(deps));
  app.use('/api', requireAdminToken(deps.tokens, () => deps.tokens().some((t) => t.name !== LOCAL_CLI_TOKEN_NAME)));
  app.use('/api', jsonBodies(deps.maxBodyBytes ?? 1024 * 1024));
  // Express would answer OPTIONS itself (200, `GET, HEAD` as text); no route has it, so it is an unknown method.
  app.use((req, _res, next) => { if (req.method === 'OPTIONS') throw new AdminError('not-found', `No route ${req.method} ${req.path}`); next(); });
  for (const resource of RESOURCES) app.use(API_PREFIX, resource(deps));
  app.use((req: Request) => { throw new AdminError('not-found', `No route ${req.method} ${req.path}`); });
  app.use(errorHandler(deps));
  return app;
}

/** What a body may be compressed with: the receiver's codings (webhook.md); br and zstd are refused there too. */
const CONTENT_CODINGS = ['identity', 'gzip', 'deflate'];

/** Bodies are JSON only, and bounded; a write without a body is fine (activate, cancel). */
function jsonBodies(limit: number) {
  const parse = express.json({ limit, type: ['application/json', 'application/*+json'], strict: false, verify: refuseDeepJson });
  return (req: Request, res: Response, next: NextFunction) => {
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (hasBody && !req.is(['application/json', 'application/*+json'])) throw new AdminError('unsupported-media');
    if (hasBody && !CONTENT_CODINGS.includes((req.headers['content-encoding'] ?? 'identity').trim().toLowerCase())) {
      throw new AdminError('unsupported-media', 'Request bodies are JSON, uncompressed or with Content-Encoding gzip or deflate');
    }
    parse(req, res, next);
  };
}

/**
 * JSON nested deeper than a webhook body may be (json-depth.ts) is refused before it is parsed: JSON.parse
 * copes, but validating, sealing and storing a document recurse, and a small body of a few thousand levels
 * ran them out of stack (answered 500 or 503, as if a backend had failed). A PUT carries a document.
 */
function refuseDeepJson(req: Request, _res: Response, body: Buffer): void {
  if (checkJsonText(body) !== 'too-deep') return;
  if (req.method === 'PUT') throw new AdminError('invalid-document', undefined, [`the document is ${TOO_DEEP}`]);
  throw new AdminError('invalid-request', `The request body is ${TOO_DEEP}`);
}

/** One line per write and per refusal, and per read at debug: who (the token's name, never the token), what, how it ended. */
function accessLog(deps: AdminApiDeps) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = Date.now();
    res.once('finish', () => {
      const caller = res.locals.caller as AdminCaller | undefined;
      const line = { method: req.method, path: req.originalUrl.split('?')[0], status: res.statusCode, caller: caller?.name, ms: Date.now() - started };
      if ((req.method === 'GET' || req.method === 'HEAD') && res.statusCode < 400) deps.logger.debug('admin api', line);
      else deps.logger.info('admin api', line);
    });
    next();
  };
}

const BODY_ERRORS: Record<string, AdminErrorCode> = {
  'entity.too.large': 'payload-too-large',
  'entity.parse.failed': 'payload-parse-error',
  'encoding.unsupported': 'unsupported-media',
  'charset.unsupported': 'unsupported-media',
  'entity.verify.failed': 'invalid-request',
  'request.size.invalid': 'invalid-request',
  'stream.encoding.set': 'internal-error',
};

function errorHandler(deps: AdminApiDeps): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    let answer: AdminError;
    if (error instanceof AdminError) answer = error;
    else if (typeof (error as { type?: unknown }).type === 'string' && BODY_ERRORS[(error as { type: string }).type]) {
      answer = new AdminError(BODY_ERRORS[(error as { type: string }).type]);
    } else if (typeof (error as { code?: unknown }).code === 'string' && (error as { code: string }).code.startsWith('Z_')) {
      // zlib could not inflate what Content-Encoding said was gzip or deflate.
      answer = new AdminError('payload-parse-error', 'The request body is not valid for its Content-Encoding');
    } else if ((error as { status?: unknown }).status === 400) {
      // express's own 400s (a path parameter that is not valid percent-encoding): said in our shape, not its text.
      answer = new AdminError('invalid-request', 'The request path or query is not valid');
    } else if (error instanceof RegistryError && error.code === 'invalid-document') {
      // The registry refused the document itself (over its size limit, say): no retry mends that, so no 503.
      answer = new AdminError('invalid-document', error.message);
    } else if (error instanceof RegistryError || error instanceof EventLogError || error instanceof ReplayStoreError) {
      deps.logger.warn('admin api: a backend failed', { method: req.method, path: req.path, error: error.message });
      // The registry's and the log's messages are their adapters' (hosts, ids); the replay directory's says what failed.
      const message = error instanceof ReplayStoreError ? `${error.message}; retry once it can be ${error.failed}` : undefined;
      answer = new AdminError('backend-unavailable', message, undefined, { 'retry-after': '5' });
    } else if (error instanceof ReplayJobUnreadable || error instanceof CheckpointInUse || error instanceof ReplayRunningElsewhere || error instanceof ReplayLedgerUnreadable) {
      answer = new AdminError('conflict', error.message);
    } else if (error instanceof ReplayConflict) {
      answer = new AdminError('conflict', error.message, error.problems);
    } else {
      // Logged by message only: a stack or a request body could hold what was being stored.
      deps.logger.error('admin api: request failed', { method: req.method, path: req.path, error: (error as Error)?.message ?? String(error) });
      answer = new AdminError('internal-error');
    }
    if (res.headersSent) { res.destroy(); return; }
    res.status(statusOf(answer)).set({ ...answer.headers, 'cache-control': 'no-store' }).json(errorBody(answer));
  };
}

const statusOf = (error: AdminError) => ADMIN_ERRORS[error.code].status;

/** Every route express has under API_PREFIX, as `METHOD /api/v1/path/{param}` (what the OpenAPI test compares). */
export function expressRoutes(app: Express): string[] {
  const found: string[] = [];
  type Layer = { route?: { path: string; methods: Record<string, boolean> }; handle?: { stack?: Layer[] } };
  const walk = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const [method, on] of Object.entries(layer.route.methods)) {
          if (on && method !== '_all') found.push(`${method.toUpperCase()} ${prefix}${layer.route.path.replace(/:(\w+)/g, '{$1}')}`);
        }
      } else if (layer.handle?.stack) walk(layer.handle.stack, API_PREFIX);
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack, '');
  return found.sort();
}
