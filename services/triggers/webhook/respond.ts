import type { Logger } from '../../platform/logger/logger';
import type { Answer } from '../answers';
import type { InboundRequest, Inspection } from '../trigger';
import type { WebhookParameters } from './parameters';
import { beyondLatin1, compileTemplateCached, type TemplateScope } from './response-template';
import { HEADER_NAME } from '../../platform/registry/document-checks';

/**
 * The answer once an event is durable (SPEC §2.1): Response Data rendered from its template (`{}` when
 * unset), Response Headers rendered and added (a Content-Type among them wins), No Response Body → an
 * empty body. The event is already accepted, so a template that fails to render is logged and answered
 * with `{}` rather than an error that would make the partner send it again.
 */
/**
 * Headers a workflow cannot set: the ingress sets them, or (Trailer) Node refuses them on an answer with a
 * Content-Length, which every answer here has, and would turn an accepted event into a 500.
 */
const RESERVED = new Set(['content-length', 'transfer-encoding', 'connection', 'x-request-id', 'trailer']);
/**
 * What the rendered Response Headers may take together (names, values, separators). An echo of the body
 * (`{{ $json.note }}`) can be hundreds of KiB; clients refuse an answer whose headers pass 8–16 KiB (Node's
 * 16 KiB, nginx's 4–8 KiB buffer as a proxy), and a partner whose client failed on the answer of an event
 * we accepted sends it again. A header that would go past it is left out and logged.
 */
export const MAX_RESPONSE_HEADER_BYTES = 8 * 1024;

export function templateScope(request: InboundRequest, inspection: Inspection): TemplateScope {
  return {
    $request: { id: request.requestId, receivedAt: new Date(request.receivedAt).toISOString() },
    $headers: request.headers,
    // A parameter given once is a string, one given several times an array.
    $query: Object.fromEntries(Object.entries(request.query).map(([k, v]) => [k, v.length === 1 ? v[0] : v])),
    $params: { workflowId: request.workflowId, path: request.pathSuffix },
    $json: inspection.json,
  };
}

export function acceptedAnswer(params: WebhookParameters, request: InboundRequest, inspection: Inspection, logger: Logger): Answer {
  const { options } = params;
  const headers: Record<string, string> = {};
  let scope: TemplateScope | null = null;
  const scopeOf = () => (scope ??= templateScope(request, inspection));
  let body = '';
  if (!options.noResponseBody) {
    body = '{}';
    headers['content-type'] = 'application/json; charset=utf-8';
    if (options.responseData !== null) {
      const source = options.responseData;
      const looksJson = /^\s*[[{]/.test(source);
      try {
        body = compileTemplateCached(source).render(scopeOf(), looksJson ? 'json' : 'body');
        if (!looksJson) headers['content-type'] = 'text/plain; charset=utf-8';
      } catch (error) {
        logger.error('response data could not be rendered; answered {}', { requestId: request.requestId, workflowId: request.workflowId, error });
        body = '{}';
      }
    }
  }
  let headerBytes = 0;
  for (const { name, value } of options.responseHeaders) {
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name) || RESERVED.has(lower)) continue;
    let rendered: string;
    try {
      rendered = compileTemplateCached(value).render(scopeOf(), 'text');
    } catch (error) {
      logger.error('a response header could not be rendered; left out', { requestId: request.requestId, header: name, error });
      continue;
    }
    // Rendered values are Latin-1 (one byte a character); `name: value\r\n`.
    const bytes = name.length + rendered.length + 4;
    if (headerBytes + bytes > MAX_RESPONSE_HEADER_BYTES) {
      logger.error(`a response header would take the answer's headers past ${MAX_RESPONSE_HEADER_BYTES} bytes; left out`, { requestId: request.requestId, header: name, bytes });
      continue;
    }
    headerBytes += bytes;
    headers[lower] = rendered;
  }
  return { status: 200, headers, body };
}

/** Problems with a node's response options, for `workflows put`. */
export function responseProblems(params: WebhookParameters, at: string): string[] {
  const problems: string[] = [];
  if (params.options.responseData !== null) {
    try { compileTemplateCached(params.options.responseData); } catch (error) { problems.push(`${at}.parameters.options.responseData: ${(error as Error).message}`); }
  }
  params.options.responseHeaders.forEach(({ name, value }, i) => {
    if (!HEADER_NAME.test(name)) problems.push(`${at}.parameters.options.responseHeaders[${i}].name ${JSON.stringify(name)} is not a valid header name`);
    else if (RESERVED.has(name.toLowerCase())) problems.push(`${at}.parameters.options.responseHeaders[${i}].name ${name} cannot be set: the ingress sets it, or the answer cannot carry it`);
    let compiled;
    try { compiled = compileTemplateCached(value); } catch (error) { problems.push(`${at}.parameters.options.responseHeaders[${i}].value: ${(error as Error).message}`); return; }
    // Written text beyond Latin-1 would be sent as '?' on every answer; a value a placeholder brings is, as documented.
    const odd = compiled.literals.map(beyondLatin1).find((c) => c !== null);
    if (odd) problems.push(`${at}.parameters.options.responseHeaders[${i}].value holds ${JSON.stringify(odd)} (U+${odd.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}): a header value carries Latin-1 characters only, and it would be sent as "?"; percent-encode it, or put the text in Response Data`);
  });
  return problems;
}
