import type { RequestOptions } from 'node:http';
import { loggableUrl } from '../net/url-allow-list';

/**
 * The `url.full` of an outgoing call's client span, with its query hidden as the logs hide it (loggableUrl:
 * `?…`). The http instrumentation redacts only the query parameters it knows by name (`sig`, AWS and Google
 * signatures); an AS2 partner's asynchronous MDN URL may carry a token under any name, and nothing of a
 * partner's choosing may leave in a span. The calls we make ourselves (Azure Blob, Cosmos DB) lose their
 * query too (`comp=list` and the like), which costs a trace reader little.
 * Null when the path has no query: the instrumentation's own value is then kept.
 */
export function queryHiddenUrl(options: RequestOptions): string | null {
  const path = options.path ?? '/';
  if (!path.includes('?')) return null;
  const name = options.hostname ?? options.host ?? 'localhost';
  const host = name.includes(':') && !name.startsWith('[') ? `[${name}]` : name;
  const port = options.port === undefined || options.port === null || options.port === '' ? '' : `:${options.port}`;
  return loggableUrl(`${options.protocol ?? 'http:'}//${host}${port}${path}`);
}
