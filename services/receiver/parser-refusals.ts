import { randomUUID } from 'node:crypto';
import type * as http from 'node:http';
import type { Socket } from 'node:net';
import type { Attributes } from '@opentelemetry/api';
import type { Logger } from '../platform/logger/logger';
import { errorAnswer, type Answer } from '../triggers/answers';
import { afterAnswer, parserRefusalStatus, rawAnswer as rawSerialised, type ParserRefusalStatus } from '../platform/net/parser-refusal';
import type { InHand } from './in-hand';

/**
 * Requests Node's HTTP parser refuses (the server's 'clientError'). Node would answer these itself, bare, at once
 * and close: a request we had accepted on the same connection lost its 200, and a partner's report of the refusal
 * could not be found in the logs. Here each gets the status Node would give it, as a JSON error with a request id,
 * and only once the answers owed before it are written.
 */
export interface ParserRefusals {
  /** The server's 'clientError' listener. */
  clientError(error: NodeJS.ErrnoException, socket: Socket): void;
  /**
   * The answer the parser's refusal gave a request in hand (its body refused), raw or (a 413) through its
   * ServerResponse: what its client got, whatever handle() then made of the request cut short (a 499, the empty
   * 200 of a missing workflow, a 401 it could no longer send). Its span and metrics record this one.
   */
  answerOf(res: http.ServerResponse): Answer | undefined;
}

export interface ParserRefusalsDeps {
  logger: Logger;
  /** Each connection's latest request (receiver.ts `track`). */
  inHand(socket: Socket): InHand | undefined;
  /** A body declared (Content-Length) over MAX_BODY_BYTES. */
  declaredTooLarge(req: http.IncomingMessage): boolean;
  /** Sends the request handle()'s own 413 through its ServerResponse, closing after it; returns that answer. */
  tooLarge(entry: InHand): Answer;
  /** The span and count of bytes refused before a request existed (no method, no duration). */
  recordRefused(requestId: string, status: number, startedAt: number, attributes: Attributes): void;
}

export function parserRefusals(deps: ParserRefusalsDeps): ParserRefusals {
  const { logger } = deps;
  /** Sockets whose parse error is handled: the parser reports the same error again on every later chunk. */
  const parseFailed = new WeakSet<Socket>();
  const parserAnswers = new WeakMap<http.ServerResponse, Answer>();

  const noteRefused = (requestId: string, socket: Socket, error: NodeJS.ErrnoException) => {
    if (logger.enabled('info')) logger.info('request refused by the HTTP parser', { requestId, code: error.code ?? null, remoteAddress: socket.remoteAddress ?? null });
  };

  /**
   * The parser's refusal, written raw, and the connection closed after it. When it refuses the body of the request
   * in hand (`current`), that request's id is the answer's, and its span and metrics record this answer (answerOf);
   * otherwise the bytes refused are a request of their own, recorded here.
   */
  function refuseUnparsable(socket: Socket, error: NodeJS.ErrnoException, current?: InHand) {
    if (socket.writable && error.code !== 'ECONNRESET') {
      const startedAt = performance.now();
      const refusal = parserAnswer(error.code);
      const requestId = current?.requestId ?? randomUUID();
      noteRefused(requestId, socket, error);
      socket.write(rawAnswer(refusal, requestId));
      if (current !== undefined) parserAnswers.set(current.res, refusal);
      else deps.recordRefused(requestId, refusal.status, startedAt, { 'ingress.parser_error': parserErrorCode(error.code) });
    }
    socket.destroy();
  }

  /** The 413 of a body declared too large and cut short, as handle() gives it: its later one is a no-op. */
  function refuseCutShort(socket: Socket, error: NodeJS.ErrnoException, current: InHand) {
    if (!socket.writable || error.code === 'ECONNRESET') return socket.destroy();
    noteRefused(current.requestId, socket, error);
    parserAnswers.set(current.res, deps.tooLarge(current));
  }

  return {
    answerOf: (res) => parserAnswers.get(res),
    // Bytes that fail the parser right after a whole request (a pipelined request with a bad header, or a body
    // longer than its Content-Length) come while that request is in flight: the refusal follows its answer.
    // Closing the connection on that answer instead would leave the pipelined request unanswered.
    clientError(error, socket) {
      if (parseFailed.has(socket)) return;
      parseFailed.add(socket);
      const current = deps.inHand(socket);
      if (current === undefined) return refuseUnparsable(socket, error);
      if (current.req.complete) {
        // Every request on the connection is whole: the refusal follows the last answer owed (all before it go out
        // first). An answer that said `Connection: close` has ended the socket: nothing follows it.
        afterAnswer(current.res, () => refuseUnparsable(socket, error));
        return;
      }
      // The error is in the current request's body. An answer it already has (a refusal sent before its body was
      // read) is its answer; otherwise the parser's refusal follows the earlier answers.
      const settle = () => {
        // A body declared over the limit is a 413 however it ends, the 413 a missing workflow gets. A client's FIN
        // before the look-up ends must not make it a 400, nor a 413 written raw (its header names, order, no Date):
        // either would tell how long the look-up took, which differs between a workflow that exists and one that does
        // not (docs/security.md). It goes out through the request's own ServerResponse, as handle() would send it.
        if (!current.res.headersSent && deps.declaredTooLarge(current.req)) return refuseCutShort(socket, error, current);
        if (!current.res.headersSent) return refuseUnparsable(socket, error, current);
        // An answer half written would be corrupted by another: it is finished, and the connection closed.
        afterAnswer(current.res, () => socket.destroy());
      };
      const owed = current.earlier;
      // Node hands the socket to the next answer in its own 'finish' listener, added before this one.
      if (owed !== undefined) afterAnswer(owed, settle);
      else settle();
    },
  };
}

/**
 * What a request the parser cannot read is answered: the statuses Node gives (platform/net/parser-refusal.ts), as
 * JSON errors with a request id like every other answer, so a partner's report of one can be found in the logs.
 */
const PARSER_ERRORS: Record<ParserRefusalStatus, Answer> = {
  400: errorAnswer('request-malformed'),
  408: errorAnswer('request-timeout', 'The request did not arrive in time'),
  // The parser's only 413: a body's size is judged by handle() (the 413 of a body declared too large).
  413: errorAnswer('payload-too-large', 'The chunk extensions are larger than 16 KiB'),
  431: errorAnswer('headers-too-large'),
};
const parserAnswer = (code: string | undefined): Answer => PARSER_ERRORS[parserRefusalStatus(code)];
/** The parser's error code for a span (`HPE_…`, a fixed set of Node's); anything else is not echoed. */
const parserErrorCode = (code: string | undefined): string => code !== undefined && /^(HPE|ERR_HTTP)_[A-Z_]{1,48}$/.test(code) ? code : 'other';

/**
 * An answer written straight to a socket that no ServerResponse has (a parse error's, a CONNECT's): its headers, a
 * request id, and the close.
 */
export function rawAnswer(answer: Answer, requestId: string): string {
  const body = answer.body as string;
  return rawSerialised(answer.status, { ...answer.headers, 'Content-Length': Buffer.byteLength(body), 'X-Request-Id': requestId }, body);
}
