/**
 * Every error the ingress answers over HTTP, in one table: its code, status and the message a
 * partner sees. Trigger plugins and the receiver name a code; nothing else picks a status.
 * AS2 dispositions get a table of their own in the AS2 trigger, keyed by the same idea.
 */
export const INGRESS_ERRORS = {
  'authorization-required': { status: 401, message: 'Authorization is required' },
  'authorization-wrong': { status: 403, message: 'Authorization data is wrong' },
  'timestamp-out-of-tolerance': { status: 403, message: 'The signature timestamp is too old or too far in the future' },
  'token-expired': { status: 403, message: 'The bearer token has expired or is not valid yet' },
  'bot-rejected': { status: 403, message: 'Requests from bots are not accepted' },
  'ip-not-allowed': { status: 403, message: 'Requests from this address are not accepted' },
  'rate-limited': { status: 429, message: 'Too many requests; retry later' },
  'protocol-requires-as2-auth': { status: 401, message: 'Protocol AS2 requires AS2 Receiver Auth' },
  'payload-parse-error': { status: 400, message: 'The request body could not be parsed' },
  'payload-too-large': { status: 413, message: 'The request body is too large' },
  'request-timeout': { status: 408, message: 'The request body stopped arriving, or arrived too slowly' },
  'unsupported-media': { status: 415, message: 'The request body has an unsupported media type' },
  'method-not-allowed': { status: 405, message: 'Only POST is accepted' },
  'expectation-failed': { status: 417, message: 'The only expectation understood is Expect: 100-continue' },
  'not-found': { status: 404, message: 'Not found' },
  'as2-mdn-not-accepted': { status: 400, message: 'This endpoint receives AS2 messages, not MDNs: an MDN goes back to the system that sent the message it acknowledges' },
  'transfer-coding-unsupported': { status: 501, message: 'Only the chunked transfer coding is accepted; compress the body with Content-Encoding instead' },
  'request-malformed': { status: 400, message: 'The request is not valid HTTP/1.1' },
  'headers-too-large': { status: 431, message: 'The request headers are larger than 16 KiB' },
  'credential-unavailable': { status: 500, message: 'The trigger cannot check credentials right now' },
  'enqueue-failed': { status: 503, message: 'The event could not be accepted; retry later' },
  'internal-error': { status: 500, message: 'Internal error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type IngressErrorCode = keyof typeof INGRESS_ERRORS;

export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string | Buffer;
  /** What the answer said beyond its status, for metrics (an AS2 disposition such as `processed/error: decryption-failed`). */
  outcome?: string;
  /**
   * The answer's error code when its body does not say it as JSON (a SOAP Fault): what the refusal journal
   * records. Never partner data: a fixed code such as `authorization-wrong` or `soap-action-unknown`.
   */
  code?: string;
}

/** The JSON error body of DESIGN.md §5: {"error":"<code>","message":"<text>"}. */
export function errorAnswer(code: IngressErrorCode, message?: string, headers: Record<string, string> = {}): Answer {
  const entry = INGRESS_ERRORS[code];
  return {
    status: entry.status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body: JSON.stringify({ error: code, message: message ?? entry.message }),
  };
}

/** Seconds a sender told "busy" is asked to wait before it sends again. */
export const RETRY_AFTER_SECONDS = '5';

/** Nothing could be accepted now (the log, the store or the memory budget is full); the sender retries. */
export const BUSY: Answer = Object.freeze(errorAnswer('enqueue-failed', undefined, { 'retry-after': RETRY_AFTER_SECONDS }));

/** The answer for a missing, inactive or trigger-less workflow: the same bytes whatever the reason. */
export const EMPTY_OK: Answer = Object.freeze({ status: 200, headers: {}, body: '' }) as Answer;

/** Whether an answer goes out as the same bytes as EMPTY_OK (only X-Request-Id, which every answer has, differs). */
export function looksEmpty(answer: Answer): boolean {
  if (answer.status !== 200 || answer.body.length !== 0) return false;
  for (const _ in answer.headers) return false;
  return true;
}

/** A failure a plugin or stage raises with its code; the message must be safe to show a partner. */
export class IngressError extends Error {
  constructor(readonly code: IngressErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? INGRESS_ERRORS[code].message, options);
    this.name = 'IngressError';
  }
}
