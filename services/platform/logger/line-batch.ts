import type { Level } from './logger';

/**
 * Log lines written together, once per turn of the event loop. At INFO the receiver logs every request,
 * and a `write` per line is a system call per request on a synchronous stdout: measured, that halved the
 * receiver's throughput (docs/benchmarks.md). Warnings and errors are written at once, with whatever waits
 * before them, so the lines an operator needs first are never the ones held back, and the order of
 * lines is kept. Call `flush` on exit: what a turn held is then written too (a crash runs 'exit' as well;
 * only SIGKILL loses the last turn's lines).
 */
export interface LineBatch {
  write(line: string, level: Level): void;
  flush(): void;
}

export function lineBatch(sink: (text: string) => void): LineBatch {
  let pending = '';
  let scheduled = false;
  const flush = () => {
    if (pending === '') return;
    const text = pending;
    pending = '';
    sink(text);
  };
  const onTurn = () => { scheduled = false; flush(); };
  return {
    write(line, level) {
      pending += line + '\n';
      if (level === 'warn' || level === 'error') flush();
      else if (!scheduled) { scheduled = true; setImmediate(onTurn); }
    },
    flush,
  };
}
