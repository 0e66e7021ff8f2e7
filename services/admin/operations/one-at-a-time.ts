/**
 * A queue of async work run one piece at a time, in the order it was asked for: each piece starts once the one
 * before it has settled, whether it resolved or failed, and its caller gets its own result or error.
 */
export type OneAtATime = <T>(work: () => Promise<T>) => Promise<T>;

export function oneAtATime(): OneAtATime {
  let queue: Promise<unknown> = Promise.resolve();
  return <T>(work: () => Promise<T>): Promise<T> => {
    const next = queue.then(work);
    // A piece that failed must not stop the ones after it: its error is its caller's alone.
    queue = next.catch(() => undefined);
    return next;
  };
}
