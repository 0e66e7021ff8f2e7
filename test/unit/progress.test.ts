import { createProgress } from '../../services/cli/progress';

const stream = (isTTY: boolean) => {
  const written: string[] = [];
  return { written, s: { isTTY, write: (text: string) => { written.push(text); return true; } } as unknown as NodeJS.WriteStream };
};

test('on a terminal: records, rate and ETA on one rewritten line, at most four times a second', () => {
  const { written, s } = stream(true);
  let now = 0;
  const progress = createProgress('replay t', s, () => now);
  now = 1000; progress.update(500, 1500);
  now = 1100; progress.update(550, 1450); // too soon: not shown
  now = 2000; progress.update(1000, 1000);
  progress.finish();
  expect(written).toEqual([
    '\rreplay t: 500 records, 500/s ETA 3s\u001b[K',
    '\rreplay t: 1000 records, 500/s ETA 2s\u001b[K',
    '\n',
  ]);
});

test('on a terminal: what it waits for replaces the line, at once', () => {
  const { written, s } = stream(true);
  const progress = createProgress('replay t', s, () => 1000);
  progress.waiting('waiting for a send');
  progress.finish();
  expect(written).toEqual(['\rreplay t: waiting for a send\u001b[K', '\n']);
});

test('on a terminal: a line of its own clears the progress line first, and the next update draws it again at once', () => {
  const { written, s } = stream(true);
  let now = 0;
  const progress = createProgress('replay t', s, () => now);
  now = 1000; progress.update(500, null);
  progress.clear();
  progress.clear(); // nothing shown: nothing to clear
  now = 1010; progress.update(510, null);
  progress.finish();
  expect(written).toEqual([
    '\rreplay t: 500 records, 500/s\u001b[K',
    '\r\u001b[K',
    '\rreplay t: 510 records, 505/s\u001b[K',
    '\n',
  ]);
});

test('piped: nothing at all', () => {
  const { written, s } = stream(false);
  const progress = createProgress('replay t', s, () => 5000);
  progress.update(10, null);
  progress.waiting('waiting for a send');
  progress.clear();
  progress.finish();
  expect(written).toEqual([]);
});
