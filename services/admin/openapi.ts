import { ADMIN_ERRORS } from './errors';

/**
 * The management API described in OpenAPI 3.1, written by hand beside the routes; test/integration/admin-api
 * checks that every documented path and method exists in express and every route is documented.
 */
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = (...codes: (keyof typeof ADMIN_ERRORS)[]) => Object.fromEntries([...new Set(codes.map((c) => ADMIN_ERRORS[c].status))].map((status) => [
  String(status), json(ref('Error'), codes.filter((c) => ADMIN_ERRORS[c].status === status).join(', ')),
]));
const pathParam = (name: string, description: string) => ({ name, in: 'path', required: true, description, schema: { type: 'string' } });
const queryParam = (name: string, description: string, schema: unknown = { type: 'string' }) => ({ name, in: 'query', required: false, description, schema });
const body = (schema: unknown, description: string) => ({ required: true, description, content: { 'application/json': { schema } } });
const READ = ['authorization-required', 'authorization-wrong', 'backend-unavailable'] as const;
const WRITE = [...READ, 'scope-insufficient', 'payload-too-large', 'payload-parse-error', 'unsupported-media'] as const;
const id = pathParam('id', 'The document id');
const headerParam = (name: string, description: string) => ({ name, in: 'header', required: false, description, schema: { type: 'string' } });
/** Optimistic concurrency on a document (docs/management-api.md): its reads carry an ETag, its writes take these. */
const ifMatch = headerParam('If-Match', 'Write only over this version: an ETag from a read of the document, or * (it must exist)');
const ifNoneMatch = headerParam('If-None-Match', '*: create only, refused when the document exists');
const CONDITIONAL = ['invalid-request', 'precondition-failed'] as const;
const etag = { ETag: { description: 'The version of the document, for If-Match', schema: { type: 'string' } } };
/** A replay's decision for copies retention may have deleted (refeed.ts CopiesUnknown); used only when that is the case. */
const UNKNOWN_COPIES_FIELD = { type: 'string', enum: ['skip', 'append'], description: 'Only for a run that finds retention deleted records where its last run\'s announced batch may have landed (it fails without it): skip appends none of the copies not found that may have gone where retention deleted records, counted skipped (at most once), and the others once; append appends them again (at least once). Ignored otherwise' };
const tagged = <T extends object>(response: T) => ({ ...response, headers: etag });

export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Inbound event ingress: management API',
      version: '1.0.0',
      description: 'Served on the admin port (ADMIN_PORT, ADMIN_HOST). Every route needs Authorization: Bearer <admin token> (ADMIN_TOKENS); read-scope tokens may GET only. See docs/management-api.md.',
    },
    servers: [{ url: '/' }],
    security: [{ adminToken: [] }],
    paths: {
      '/api/v1/whoami': {
        get: { summary: "The calling token's name and scope (the console shows what a read token may not do)", responses: { 200: json({ type: 'object', properties: { name: { type: 'string' }, scope: { type: 'string', enum: ['read', 'full'] } } }, 'The caller'), ...errors(...READ) } },
      },
      '/api/v1/workflows': {
        get: { summary: 'List workflows with their hook URLs and trigger nodes', responses: { 200: json({ type: 'object', properties: { workflows: { type: 'array', items: ref('WorkflowSummary') } } }, 'The workflows, by id'), ...errors(...READ) } },
      },
      '/api/v1/workflows/{id}': {
        get: { summary: 'A workflow document as stored (If-None-Match with its ETag: 304 while it is unchanged)', parameters: [id], responses: { 200: tagged(json(ref('Workflow'), 'The document')), 304: { description: 'Unchanged since the ETag in If-None-Match' }, ...errors(...READ, 'not-found') } },
        put: { summary: 'Store a workflow (validated as `ingress workflows put` validates it)', parameters: [id, ifMatch, ifNoneMatch], requestBody: body(ref('Workflow'), 'The workflow document; its id may be left out'), responses: { 200: tagged(json(ref('WorkflowSummary'), 'Replaced')), 201: tagged(json(ref('WorkflowSummary'), 'Created')), ...errors(...WRITE, 'invalid-document', ...CONDITIONAL, 'conflict') } },
      },
      '/api/v1/workflows/{id}/activate': {
        post: { summary: 'Set active: true', parameters: [id, ifMatch], responses: { 200: tagged(json(ref('WorkflowSummary'), 'The workflow')), ...errors(...WRITE, 'not-found', ...CONDITIONAL, 'conflict') } },
      },
      '/api/v1/workflows/{id}/deactivate': {
        post: { summary: 'Set active: false (its hook then answers like a missing workflow)', parameters: [id, ifMatch], responses: { 200: tagged(json(ref('WorkflowSummary'), 'The workflow')), ...errors(...WRITE, 'not-found', ...CONDITIONAL, 'conflict') } },
      },
      '/api/v1/workflows/{id}/samples': {
        get: { summary: 'The latest sample data of each trigger node (newest first)', parameters: [id], responses: { 200: json({ type: 'object', properties: { workflowId: { type: 'string' }, nodes: { type: 'array', items: { type: 'object', properties: { node: { type: 'string' }, type: { type: 'string' }, samples: { type: 'array', items: ref('Sample') } } } } } }, 'Samples per node'), ...errors(...READ, 'not-found') } },
      },
      '/api/v1/workflows/{id}/nodes/{node}/samples': {
        get: { summary: 'The latest sample data of one node', parameters: [id, pathParam('node', 'The node name')], responses: { 200: json({ type: 'object', properties: { workflowId: { type: 'string' }, node: { type: 'string' }, samples: { type: 'array', items: ref('Sample') } } }, 'Samples'), ...errors(...READ, 'not-found') } },
      },
      '/api/v1/credentials': {
        get: { summary: 'Credential metadata, never secrets: id, type, and the public facts of their certificates', responses: { 200: json({ type: 'object', properties: { credentials: { type: 'array', items: ref('CredentialMetadata') } } }, 'The credentials'), ...errors(...READ) } },
      },
      '/api/v1/credentials/reseal': {
        post: { summary: 'After INGRESS_ENCRYPTION_KEY was rotated: seal again under it every credential only INGRESS_ENCRYPTION_KEY_PREVIOUS opens (as `ingress credentials reseal`)', responses: { 200: json({ type: 'object', properties: { resealed: { type: 'array', items: { type: 'string' } }, current: { type: 'integer' }, unreadable: { type: 'array', items: { type: 'string' } } } }, 'Resealed ids, how many were current already, ids neither key opens'), ...errors(...WRITE, 'encryption-key-missing') } },
      },
      '/api/v1/credentials/{id}': {
        get: { summary: "One credential's metadata, with the ETag of its stored version (for If-Match; no 304: the answer's daysToExpiry changes while the version does not)", parameters: [id], responses: { 200: tagged(json(ref('CredentialMetadata'), 'Metadata')), ...errors(...READ, 'not-found') } },
        put: { summary: 'Store a credential, its secrets sealed with INGRESS_ENCRYPTION_KEY. AS2: receiver keys and partner certificates the put removes are kept retired, for the decoder and replays only (conflict when the stored credential cannot be opened to keep them)', parameters: [id, queryParam('forgetRetired', 'true: keep nothing this put removes, and drop what earlier puts retired', { type: 'boolean' }), ifMatch, ifNoneMatch], requestBody: body({ type: 'object', required: ['type', 'data'], properties: { id: { type: 'string' }, name: { type: 'string' }, type: { type: 'string', enum: ['basicAuth', 'headerAuth', 'as2ReceiverAuth', 'rsaSignature', 'standardWebhooks', 'hmac', 'jwt'] }, data: { type: 'object' } } }, 'A credential document (DESIGN §5)'), responses: { 200: tagged(json(ref('CredentialMetadata'), 'Replaced')), 201: tagged(json(ref('CredentialMetadata'), 'Created')), ...errors(...WRITE, 'invalid-document', ...CONDITIONAL, 'conflict', 'encryption-key-missing') } },
        delete: { summary: 'Delete a credential no workflow names', parameters: [id, ifMatch], responses: { 204: { description: 'Deleted' }, ...errors(...WRITE, 'not-found', ...CONDITIONAL, 'conflict') } },
      },
      '/api/v1/certificates': {
        get: { summary: 'Certificates of every credential that expire within withinDays (expired ones included), soonest first', parameters: [queryParam('withinDays', 'Days ahead, default 30', { type: 'integer', minimum: 0, maximum: 3650 })], responses: { 200: json({ type: 'object', properties: { withinDays: { type: 'integer' }, certificates: { type: 'array', items: ref('Certificate') } } }, 'Certificates'), ...errors(...READ, 'invalid-request') } },
      },
      '/api/v1/dead-letters': {
        get: {
          summary: 'Dead letters, newest first (as `ingress dead-letters list`)',
          parameters: [queryParam('stage', 'The stage that dead-lettered it: decoder, dispatcher, sampler or mdn'), queryParam('workflow', 'A workflow id'), queryParam('since', 'An ISO time'), queryParam('limit', '1-1000, default 100', { type: 'integer' }), queryParam('withSource', 'true: include each source record (base64)', { type: 'boolean' })],
          responses: { 200: json({ type: 'object', properties: { deadLetters: { type: 'array', items: ref('DeadLetter') }, total: { type: 'integer' }, truncated: { type: 'boolean' } } }, 'Dead letters'), ...errors(...READ, 'invalid-request') },
        },
      },
      '/api/v1/dead-letters/replay': {
        post: { summary: 'Replay the selected dead letters into the stage they failed in (a replay job); while a job of the same filters is unfinished, go on with it', requestBody: body({ type: 'object', properties: { stage: { type: 'string' }, workflow: { type: 'string' }, since: { type: 'string', format: 'date-time' }, letters: { type: 'array', items: { type: 'string', pattern: '^\\d+/\\d+$' } }, unknownCopies: UNKNOWN_COPIES_FIELD } }, 'Filters; every dead letter when empty'), responses: { 200: json(ref('Replay'), 'A job of the same filters is running already'), 202: json(ref('Replay'), 'Started, or an unfinished job of the same filters resumed'), ...errors(...WRITE, 'invalid-request', 'conflict') } },
      },
      '/api/v1/replays': {
        get: { summary: 'Every replay this service ran or runs, newest first', responses: { 200: json({ type: 'object', properties: { replays: { type: 'array', items: ref('Replay') } } }, 'Replays'), ...errors(...READ) } },
        post: { summary: 'Start a range replay (as `ingress replay TOPIC --from --to --workflow`); the same request again resumes it, or does nothing once complete', requestBody: body({ type: 'object', required: ['topic', 'from'], properties: { topic: { type: 'string' }, from: { type: ['string', 'integer'], description: 'An offset or an ISO time' }, to: { type: ['string', 'integer', 'null'], description: 'An offset (inclusive) or an ISO time (exclusive); a from after it (offsets), or not before it (times), is 400 invalid-request' }, workflow: { type: ['string', 'null'] }, unknownCopies: UNKNOWN_COPIES_FIELD } }, 'The range'), responses: { 200: json(ref('Replay'), 'Running or complete already'), 202: json(ref('Replay'), 'Started'), ...errors(...WRITE, 'invalid-request', 'conflict') } },
      },
      '/api/v1/replays/{id}': {
        get: { summary: "A replay's progress", parameters: [pathParam('id', 'The replay id')], responses: { 200: json(ref('Replay'), 'The replay'), ...errors(...READ, 'not-found') } },
      },
      '/api/v1/replays/{id}/cancel': {
        post: { summary: 'Stop a running replay after its current batch (it stays resumable); conflict when another process runs it (runningIn)', parameters: [pathParam('id', 'The replay id')], responses: { 200: json(ref('Replay'), 'The replay, cancelled (or as it was when not running)'), ...errors(...WRITE, 'not-found', 'conflict') } },
      },
      '/api/v1/replays/{id}/resume': {
        post: { summary: 'Go on with a cancelled, interrupted or failed replay from its checkpoint (conflict while its record is unreadable)', parameters: [pathParam('id', 'The replay id')], requestBody: { ...body({ type: 'object', properties: { unknownCopies: UNKNOWN_COPIES_FIELD } }, 'Optional: the decision for copies retention may have deleted'), required: false }, responses: { 200: json(ref('Replay'), 'Running or complete already'), 202: json(ref('Replay'), 'Resumed'), ...errors(...WRITE, 'invalid-request', 'not-found', 'conflict') } },
      },
      '/api/v1/topics': {
        get: { summary: 'The topics the tail can read', responses: { 200: json({ type: 'object', properties: { topics: { type: 'array', items: { type: 'string' } } } }, 'Topics'), ...errors(...READ) } },
      },
      '/api/v1/topics/{topic}/tail': {
        get: {
          summary: 'A live tail of a topic as Server-Sent Events: one `record` event per record, its data one JSON object (Avro decoded)',
          parameters: [pathParam('topic', 'A pipeline topic'), queryParam('from', 'end (new records only, the default) or beginning', { type: 'string', enum: ['end', 'beginning'] })],
          responses: { 200: { description: 'text/event-stream until the client goes', content: { 'text/event-stream': { schema: { type: 'string' } } } }, ...errors(...READ, 'not-found', 'invalid-request') },
        },
      },
      '/api/v1/events': {
        get: {
          summary: 'Search the request journal, newest first (as `ingress events search`); at most one of messageId, postId, trackingId',
          parameters: [
            queryParam('workflow', 'A workflow id'), queryParam('messageId', 'An AS2 Message-Id, with or without <>'), queryParam('postId', "A warehouse post's PostId"),
            queryParam('trackingId', "A logistics event's TrackingID"), queryParam('since', 'ISO time or epoch ms, inclusive'), queryParam('until', 'ISO time or epoch ms, exclusive (the last entry of a page asks for the next)'),
            queryParam('limit', 'At most this many, 1 to 1000, default 50', { type: 'integer', minimum: 1, maximum: 1000 }),
          ],
          responses: { 200: json({ type: 'object', properties: { events: { type: 'array', items: ref('JournalEntry') } } }, 'Matching entries'), ...errors(...READ, 'invalid-request') },
        },
      },
      '/api/v1/events/{requestId}': {
        get: { summary: "A request's journey, oldest first (as `ingress events get`)", parameters: [pathParam('requestId', 'The X-Request-Id the request was answered with')], responses: { 200: json({ type: 'object', properties: { requestId: { type: 'string' }, entries: { type: 'array', items: ref('JournalEntry') } } }, 'The journey'), ...errors(...READ, 'not-found', 'invalid-request') } },
      },
      '/api/v1/openapi.json': {
        get: { summary: 'This document', responses: { 200: json({ type: 'object' }, 'OpenAPI 3.1'), ...errors(...READ) } },
      },
    },
    components: {
      securitySchemes: { adminToken: { type: 'http', scheme: 'bearer', description: 'A token of ADMIN_TOKENS (name:scope:token); scope read allows GET, full allows everything' } },
      schemas: {
        Error: { type: 'object', required: ['error', 'message'], properties: { error: { type: 'string', enum: Object.keys(ADMIN_ERRORS) }, message: { type: 'string' }, problems: { type: 'array', items: { type: 'string' } } } },
        Workflow: { type: 'object', required: ['active', 'nodes'], properties: { id: { type: 'string' }, name: { type: 'string' }, active: { type: 'boolean' }, nodes: { type: 'array', items: { type: 'object', required: ['name', 'type'], properties: { name: { type: 'string' }, type: { type: 'string' }, disabled: { type: 'boolean' }, parameters: { type: 'object' }, credentials: { type: 'object', additionalProperties: { type: 'string' } } } } } } },
        WorkflowSummary: { type: 'object', properties: { id: { type: 'string' }, name: { type: ['string', 'null'] }, active: { type: 'boolean' }, url: { type: ['string', 'null'], description: 'The hook URL partners POST to; null when not known (PORT=0 without PUBLIC_BASE_URL, in a process whose receiver does not run)' }, triggers: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, type: { type: 'string' }, disabled: { type: 'boolean' } } } } } },
        JournalEntry: {
          type: 'object',
          properties: {
            id: { type: 'string' }, requestId: { type: 'string' }, workflowId: { type: ['string', 'null'] }, kind: { type: 'string' }, at: { type: 'string', format: 'date-time' },
            traceId: { type: ['string', 'null'] }, traceSampled: { type: 'boolean', enum: [false], description: 'Present, false, when the trace was not sampled: no span of it was exported, and there is no traceUrl' }, traceUrl: { type: 'string' }, source: { type: 'string' }, replayOf: { type: ['string', 'null'] }, keys: { type: 'array', items: { type: 'string' } }, detail: { type: 'object' },
          },
        },
        Sample: { type: 'object', properties: { executionId: { type: 'string' }, receivedAt: { type: 'integer' }, data: {} } },
        Certificate: { type: 'object', properties: { credentialId: { type: 'string' }, credentialType: { type: 'string' }, role: { type: 'string', enum: ['receiver', 'partner'] }, field: { type: 'string' }, subject: { type: 'string' }, issuer: { type: 'string' }, serialNumber: { type: 'string' }, fingerprint: { type: 'string' }, notBefore: { type: 'string' }, notAfter: { type: 'string' }, daysToExpiry: { type: 'integer' } } },
        CredentialMetadata: { type: 'object', properties: { id: { type: 'string' }, name: { type: ['string', 'null'] }, type: { type: 'string' }, updatedAt: { type: 'string' }, certificates: { type: ['array', 'null'], items: { type: 'object' } }, retiredCertificates: { type: 'array', items: { type: 'object' } }, certificatesError: { type: 'string' } } },
        DeadLetter: { type: 'object', properties: { stage: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' }, attempts: { type: 'integer' }, failedAt: { type: 'string' }, workflowId: { type: ['string', 'null'] }, requestId: { type: ['string', 'null'] }, partition: { type: 'integer' }, offset: { type: 'string' }, source: { type: 'string', description: 'topic/partition/offset of the record that failed' }, replayOf: { type: ['string', 'null'], description: 'when the record that failed was a replayed copy: topic/partition/offset of the original it replays' } } },
        Replay: { type: 'object', properties: { id: { type: 'string' }, kind: { type: 'string', enum: ['range', 'dead-letters'] }, request: { type: ['object', 'null'] }, state: { type: 'string', enum: ['running', 'complete', 'cancelled', 'interrupted', 'failed', 'unreadable'] }, replayed: { type: 'integer' }, skipped: { type: 'integer' }, duplicates: { type: 'integer', description: 'of skipped: letters of a request this or an earlier replay replays' }, unrecorded: { type: 'integer', description: 'of skipped: letters not replayed because the replay ledger is full' }, unknownCopies: { type: 'integer', description: 'of skipped: records of a died run\'s announced batch whose copies were not found where retention had deleted records, skipped as a resume decided (unknownCopies: skip)' }, skippedLetters: { type: 'array', maxItems: 100, items: { type: 'object' }, description: 'the first 100 duplicates, unrecorded letters and unknown copies, each {at, skip, requestId, original, replayedBy?, replayedWith?} or, for skip unknownCopies, {at, skip, copy, topic, requestId} (requestId null when the copy is not a record of this service)' }, lettersNotFound: { type: 'array', items: { type: 'string' }, description: 'of a dead-letter replay\'s named letters, those that are no dead letter its filters select (no record there, not a dead letter, another stage or workflow, before since): not replayed' }, read: { type: 'integer' }, remaining: { type: ['integer', 'null'] }, startedAt: { type: 'string' }, finishedAt: { type: ['string', 'null'] }, error: { type: ['string', 'null'] }, runningIn: { type: ['integer', 'null'], description: 'the pid of another live process on this DATA_DIR running the job' }, waitingOn: { type: ['object', 'null'], properties: { at: { type: 'string' }, original: { type: 'string' }, replay: { type: 'string' }, letter: { type: 'string' }, since: { type: 'string' } }, description: 'while a dead-letter replay waits at its letter `at` for another replay of this service (`replay`, with its `letter`) to append or let go of the same original: since when; else null' } } },
      },
    },
  };
}
