/**
 * What the OpenTelemetry HTTP semantic conventions make of a server request, for its span and its metrics: the
 * method as one of a fixed set (so a metric's attributes stay bounded whatever a client sends) and the span's name.
 */

/** The methods the conventions know (RFC 9110 and PATCH); any other is `_OTHER`. */
const KNOWN_METHODS = ['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE'];
export const OTHER_METHOD = '_OTHER';

/** The one route the server has, as `http.route` gives it. */
export const HOOK_ROUTE = '/hook/{workflowId}';

/** What the conventions record of a request beside its status, for its span and its metrics. */
export interface HttpShape {
  /** `http.request.method`: the method as sent when known, else `_OTHER` (the original then goes in `http.request.method_original`). */
  readonly method: string;
  /** Whether the target matched `/hook/{workflowId}`: only then is `http.route` recorded. */
  readonly routed: boolean;
  /**
   * `{method} /hook/{workflowId}` when the route matched, `{method}` alone when not (never the raw path: span
   * names are grouped on), with `HTTP` for the method when it is `_OTHER`.
   */
  readonly spanName: string;
}

// Made once, so that a request's shape allocates nothing: each method's, the route matched or not.
const shapes = new Map<string, readonly [HttpShape, HttpShape]>();
for (const method of [...KNOWN_METHODS, OTHER_METHOD]) {
  const shown = method === OTHER_METHOD ? 'HTTP' : method;
  shapes.set(method, [{ method, routed: false, spanName: shown }, { method, routed: true, spanName: `${shown} ${HOOK_ROUTE}` }]);
}
const OTHER = shapes.get(OTHER_METHOD)!;

/** The shape of a request with this method, as sent (undefined: not known, as for what the HTTP parser refused). */
export const httpShape = (method: string | undefined, routed: boolean): HttpShape =>
  ((method !== undefined && shapes.get(method)) || OTHER)[routed ? 1 : 0];
