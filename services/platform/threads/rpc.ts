import type { Transferable } from 'node:worker_threads';

/** A MessagePort, a Worker (its parent's side) or parentPort. */
export interface Port {
  postMessage(value: unknown, transfer?: readonly Transferable[]): void;
  on(event: string, listener: (value: any) => void): unknown;
  off(event: string, listener: (value: any) => void): unknown;
}

/**
 * Calls between two threads over one MessagePort, both ways: `call` waits for the other side's answer,
 * `notify` does not. Errors cross as their name, message, code and stack, so that what decides on an error's
 * kind (dead-lettering's permanent names, EventLogError codes) decides the same on the other side.
 */
export type Handler = (...args: never[]) => unknown;

export interface Rpc {
  /**
   * `withinMs`: give up waiting after this long (the call is forgotten, and its answer ignored should it come),
   * for callers that would otherwise leave a call waiting for ever on a thread that no longer answers.
   */
  call<T>(method: string, args: unknown[], transfer?: readonly Transferable[], withinMs?: number): Promise<T>;
  notify(method: string, args: unknown[], transfer?: readonly Transferable[]): void;
  /** Fail every call waiting for an answer, and every later call, with `error`; stop listening. */
  close(error: Error): void;
}

interface Request { id?: number; method: string; args: unknown[] }
interface Response { id: number; ok: boolean; value?: unknown; error?: WireError }
export interface WireError { name: string; message: string; code?: unknown; stack?: string }

export function toWireError(error: unknown): WireError {
  // Not `instanceof Error`: a DOMException (postMessage's DataCloneError) may come from another realm.
  if (isErrorLike(error)) return { name: error.name, message: error.message, code: (error as { code?: unknown }).code, stack: error.stack };
  return { name: 'Error', message: String(error) };
}

function isErrorLike(value: unknown): value is Error {
  return value instanceof Error || (typeof value === 'object' && value !== null && typeof (value as Error).name === 'string' && typeof (value as Error).message === 'string');
}

export function fromWireError(wire: WireError): Error {
  const error = new Error(wire.message) as Error & { code?: unknown };
  error.name = wire.name;
  if (wire.code !== undefined) error.code = wire.code;
  if (wire.stack) error.stack = wire.stack;
  return error;
}

/** A handler answers with `transferable(value, list)` to move buffers to the caller instead of copying them. */
const TRANSFER = Symbol('transfer');
interface WithTransfer { [TRANSFER]: true; value: unknown; transfer: readonly Transferable[] }
export function transferable(value: unknown, transfer: readonly Transferable[]): unknown {
  return { [TRANSFER]: true, value, transfer } satisfies WithTransfer;
}

export function rpcOver(port: Port, handlers: Record<string, Handler>): Rpc {
  const waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let nextId = 1;
  let closedWith: Error | null = null;

  /**
   * A value the structured clone cannot copy (a function, a closed port, an error whose code is one) throws
   * in postMessage: the caller would wait for ever, so it gets that failure as its answer instead.
   */
  const postAnswer = (response: Response, transfer: readonly Transferable[] = []) => {
    try {
      port.postMessage(response, transfer);
    } catch (error) {
      const cause = toWireError(error);
      const wire = { name: cause.name, message: `the answer to call ${response.id} could not be sent to the other thread: ${cause.message}` };
      port.postMessage({ id: response.id, ok: false, error: wire } satisfies Response);
    }
  };

  const answer = (id: number, outcome: Promise<unknown>) => {
    outcome.then(
      (value) => {
        if (closedWith) return;
        if (value && typeof value === 'object' && TRANSFER in value) {
          const t = value as WithTransfer;
          postAnswer({ id, ok: true, value: t.value }, t.transfer);
        } else postAnswer({ id, ok: true, value });
      },
      (error: unknown) => { if (!closedWith) postAnswer({ id, ok: false, error: toWireError(error) }); },
    );
  };

  const onMessage = (message: Request | Response) => {
    if ('method' in message) {
      const handler = handlers[message.method];
      const run = handler
        ? new Promise((resolve) => resolve((handler as (...a: unknown[]) => unknown)(...message.args)))
        : Promise.reject(new Error(`no handler for ${message.method}`));
      if (message.id !== undefined) answer(message.id, run);
      else run.catch(() => undefined); // a notification's handler reports its own failures
      return;
    }
    const pending = waiting.get(message.id);
    if (!pending) return;
    waiting.delete(message.id);
    if (message.ok) pending.resolve(message.value);
    else pending.reject(fromWireError(message.error!));
  };
  port.on('message', onMessage);

  return {
    call<T>(method: string, args: unknown[], transfer: readonly Transferable[] = [], withinMs?: number) {
      if (closedWith) return Promise.reject(closedWith);
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        if (withinMs === undefined) waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
        else {
          const timer = setTimeout(() => {
            waiting.delete(id);
            reject(new Error(`${method}: no answer from the other thread within ${withinMs} ms`));
          }, withinMs);
          timer.unref();
          waiting.set(id, {
            resolve: (value) => { clearTimeout(timer); (resolve as (value: unknown) => void)(value); },
            reject: (error) => { clearTimeout(timer); reject(error); },
          });
        }
        try {
          port.postMessage({ id, method, args } satisfies Request, transfer);
        } catch (error) {
          // Arguments that cannot be cloned: nothing was sent, so no answer will come.
          waiting.delete(id);
          reject(error);
        }
      });
    },
    notify(method, args, transfer = []) {
      if (!closedWith) port.postMessage({ method, args } satisfies Request, transfer);
    },
    close(error) {
      if (closedWith) return;
      closedWith = error;
      port.off('message', onMessage);
      for (const pending of waiting.values()) pending.reject(error);
      waiting.clear();
    },
  };
}
