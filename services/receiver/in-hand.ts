import type * as http from 'node:http';

/**
 * A request on a connection, with the answer before it when that was still unwritten as it came. Node writes a
 * connection's answers in order and each finishes only after the one before it, so what must follow the answers
 * owed (an accept, a parse error's refusal, a CONNECT's) waits for the 'finish' of the latest of them
 * (platform/net/parser-refusal.ts `afterAnswer`).
 */
export interface InHand {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** Its id, made as it comes: a parse error in its body is answered with it (parser-refusals.ts). */
  requestId: string;
  earlier: http.ServerResponse | undefined;
  seq: number;
  /** Whether this request, or one whose answer was owed before it when it came, may close the connection late. */
  late: boolean;
  /** The answer owed just before this one, when `late` holds for its request: this one's accept waits for it. */
  undecided: http.ServerResponse | undefined;
}

/** Settles once the answer is written (true), or its connection closed before it was (false). */
export function answered(res: http.ServerResponse): Promise<boolean> {
  return new Promise((resolve) => {
    const finished = () => { res.off('close', closed); resolve(true); };
    const closed = () => { res.off('finish', finished); resolve(res.writableFinished); };
    res.once('finish', finished);
    res.once('close', closed);
  });
}
