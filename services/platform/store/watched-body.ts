import { Readable } from 'node:stream';

export interface BodyWatch {
  /** The longest a reader that asked for bytes waits for the next ones. */
  idleMs: number;
  /** The error of a body that sent nothing for idleMs while its reader waited, `bytes` into it. */
  stalled(bytes: number): Error;
  /** The error of a body whose stream failed or closed before its end, `bytes` into it. */
  brokeOff(error: unknown, bytes: number): Error;
}

/**
 * A download's body as the reader sees it: the same bytes, but a server that stops sending mid-body fails it
 * after idleMs instead of leaving the reader waiting for ever, and any failure of the source is the caller's
 * error (an SDK's bare AbortError on a connection reset says nothing a caller can act on).
 *
 * It pulls from the source only when its reader asks (highWaterMark 0), so the timer runs only while the
 * reader is waiting with nothing to read: a reader that pauses holds the source back through its own buffers
 * (back-pressure), and that is never taken for a stall.
 */
export function watchedBody(source: Readable, watch: BodyWatch): Readable {
  let bytes = 0;
  let wanted = false;
  let timer: NodeJS.Timeout | undefined;
  const disarm = () => {
    clearTimeout(timer);
    timer = undefined;
  };

  const body = new Readable({
    highWaterMark: 0,
    read() {
      wanted = true;
      pull();
    },
    destroy(error, callback) {
      disarm();
      source.destroy();
      callback(error);
    },
  });

  function pull() {
    while (wanted && !body.destroyed) {
      const chunk = source.read() as Buffer | null;
      if (chunk === null) {
        // Nothing yet: 'readable' (or 'end') comes when there is.
        timer ??= setTimeout(() => body.destroy(watch.stalled(bytes)), watch.idleMs);
        return;
      }
      disarm();
      bytes += chunk.length;
      wanted = body.push(chunk);
    }
  }

  source.on('readable', () => { if (wanted) pull(); });
  source.on('end', () => {
    disarm();
    body.push(null);
  });
  source.on('error', (error) => body.destroy(watch.brokeOff(error, bytes)));
  source.on('close', () => {
    if (!source.readableEnded) body.destroy(watch.brokeOff(new Error('the stream closed before its end'), bytes));
  });
  return body;
}
