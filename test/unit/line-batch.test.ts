import { lineBatch } from '../../services/platform/logger/line-batch';

/** The batching of log lines, on Jest's clock (setImmediate is faked). */
beforeEach(() => { jest.useFakeTimers(); });
afterEach(() => { jest.useRealTimers(); });

test("a turn's lines reach the sink together, once, after the turn", () => {
  const sink = jest.fn();
  const lines = lineBatch(sink);
  lines.write('{"n":1}', 'info');
  lines.write('{"n":2}', 'debug');
  expect(sink).not.toHaveBeenCalled();
  jest.runOnlyPendingTimers();
  expect(sink.mock.calls).toEqual([['{"n":1}\n{"n":2}\n']]);
  jest.runOnlyPendingTimers();
  expect(sink).toHaveBeenCalledTimes(1); // nothing more to write, nothing written
});

test('a warning or an error is written at once, after the lines that came before it', () => {
  const sink = jest.fn();
  const lines = lineBatch(sink);
  lines.write('a', 'info');
  lines.write('b', 'warn');
  expect(sink.mock.calls).toEqual([['a\nb\n']]);
  lines.write('c', 'error');
  expect(sink.mock.calls).toEqual([['a\nb\n'], ['c\n']]);
  jest.runOnlyPendingTimers();
  expect(sink).toHaveBeenCalledTimes(2);
});

test('flush writes what the turn holds (as on exit), and only once', () => {
  const sink = jest.fn();
  const lines = lineBatch(sink);
  lines.write('last words', 'info');
  lines.flush();
  expect(sink.mock.calls).toEqual([['last words\n']]);
  lines.flush();
  jest.runOnlyPendingTimers();
  expect(sink).toHaveBeenCalledTimes(1);
});
