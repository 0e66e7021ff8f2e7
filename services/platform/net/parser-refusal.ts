import * as http from 'node:http';

/**
 * What both HTTP servers (the receiver's, the admin port's) share in answering a request Node's parser refuses (the
 * server's 'clientError'), each in its own body shape: the status Node would give it, the raw answer (no
 * ServerResponse exists for it), and the wait for the answers owed before it on the connection, so that a refusal
 * never goes out as the answer of an earlier request.
 */

export type ParserRefusalStatus = 400 | 408 | 413 | 431;

/** The status lib/_http_server.js gives a parser error: any code it does not name is a 400. */
export function parserRefusalStatus(code: string | undefined): ParserRefusalStatus {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW': return 431;
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW': return 413;
    case 'ERR_HTTP_REQUEST_TIMEOUT': return 408;
    default: return 400;
  }
}

/**
 * An answer written straight to a socket: the status line, the headers in the order given (the caller's
 * Content-Length among them), `Connection: close` (the socket is destroyed after it), and the body.
 */
export function rawAnswer(status: number, headers: Record<string, string | number>, body: string): string {
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${lines}Connection: close\r\n\r\n${body}`;
}

/**
 * `then` once the answer is written: at once if it is, else on its 'finish'. Node writes a connection's answers in
 * order and each finishes only after the one before it, so what must follow every answer owed waits for the latest.
 */
export function afterAnswer(res: http.ServerResponse, then: () => void): void {
  if (res.writableFinished) then();
  else res.once('finish', then);
}
