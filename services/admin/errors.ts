import { INGRESS_ERRORS } from '../triggers/answers';

/**
 * Every error the management API answers, in one table like the ingress's (triggers/answers.ts), and in the
 * same JSON shape: `{"error":"<code>","message":"<text>"}`, with `problems` listing each fault of a document.
 * Routes throw an AdminError naming a code; the error handler (api.ts) is the only place that writes one.
 */
export const ADMIN_ERRORS = {
  'authorization-required': { status: 401, message: 'An admin token is required: Authorization: Bearer <token>' },
  'authorization-wrong': { status: 403, message: INGRESS_ERRORS['authorization-wrong'].message },
  'scope-insufficient': { status: 403, message: 'This admin token has the read scope; writes need a token with the full scope' },
  'invalid-request': { status: 400, message: 'The request is not valid' },
  'invalid-document': { status: 400, message: 'The document is not valid' },
  'payload-parse-error': { status: 400, message: 'The request body is not valid JSON' },
  'payload-too-large': { status: 413, message: INGRESS_ERRORS['payload-too-large'].message },
  'unsupported-media': { status: 415, message: 'Request bodies are JSON: Content-Type: application/json' },
  'not-found': { status: 404, message: INGRESS_ERRORS['not-found'].message },
  'conflict': { status: 409, message: 'The request conflicts with the current state' },
  'precondition-failed': { status: 412, message: 'The document is not in the state If-Match or If-None-Match names' },
  'encryption-key-missing': { status: 503, message: 'INGRESS_ENCRYPTION_KEY is not set on the service, so credentials cannot be stored or read' },
  'service-starting': { status: 503, message: 'The service is starting or stopping; retry shortly' },
  'backend-unavailable': { status: 503, message: 'A backend (log, registry) did not answer; retry later' },
  'internal-error': { status: 500, message: INGRESS_ERRORS['internal-error'].message },
} as const satisfies Record<string, { status: number; message: string }>;

export type AdminErrorCode = keyof typeof ADMIN_ERRORS;

export class AdminError extends Error {
  constructor(readonly code: AdminErrorCode, message?: string, readonly problems?: string[], readonly headers: Record<string, string> = {}) {
    super(message ?? ADMIN_ERRORS[code].message);
    this.name = 'AdminError';
  }
}

export interface AdminErrorBody {
  error: AdminErrorCode;
  message: string;
  problems?: string[];
}

export function errorBody(error: AdminError): AdminErrorBody {
  return { error: error.code, message: error.message, ...(error.problems ? { problems: error.problems } : {}) };
}
