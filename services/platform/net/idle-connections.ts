import type * as http from 'node:http';

/**
 * How long our HTTP servers (the receiver, the management API) keep an idle kept-alive connection open.
 * Node's 5 s would close one about when a client (fetch keeps one 4 s) or a load balancer (60 s is usual) sends
 * its next request on it: that request fails with a reset. So it is longer than theirs. The headers timeout
 * must exceed it, or Node ends a connection whose next request's headers are still arriving. `close()` still
 * ends every connection at once.
 */
export function keepIdleConnections(server: http.Server): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
}
