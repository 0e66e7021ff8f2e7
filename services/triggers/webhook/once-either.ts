/**
 * A wait for a writer's 'drain' that also ends when the writer's work is over. A stream destroyed while
 * it pushes back (a decompressor past its bound, a parser that failed) never drains, and a caller that
 * paused its input for it would wait for ever. So: call `listener` once, on `event` or when `over`
 * settles, whichever comes first.
 */
export function onceEither(emitter: { once(event: string, l: () => void): unknown; off(event: string, l: () => void): unknown }, event: string, over: Promise<unknown>, listener: () => void): void {
  let called = false;
  const call = () => {
    if (called) return;
    called = true;
    emitter.off(event, call);
    listener();
  };
  emitter.once(event, call);
  void over.then(call, call);
}
