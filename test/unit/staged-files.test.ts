import { sanitizeFilename, uniqueNamer } from '../../services/triggers/staged-files';

/** Partner-supplied file names made safe for an object path (DESIGN.md §5). */
test('directories, control and bidi characters and leading dots are removed; nothing left is "file"', () => {
  expect(sanitizeFilename('../../etc/passwd')).toBe('passwd');
  expect(sanitizeFilename('C:\\Users\\x\\invoice.pdf')).toBe('invoice.pdf');
  expect(sanitizeFilename('a\u0000b\u202Ec.txt')).toBe('abc.txt');
  expect(sanitizeFilename('...hidden')).toBe('hidden');
  expect(sanitizeFilename('../..')).toBe('file');
  expect(sanitizeFilename(null)).toBe('file');
  expect(sanitizeFilename('Rechnung März.pdf')).toBe('Rechnung März.pdf');
});

test('long names are cut to 200 UTF-8 bytes at a character boundary, the extension kept', () => {
  const cut = sanitizeFilename(`${'ä'.repeat(150)}.pdf`);
  expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(200);
  expect(cut).toMatch(/^ä+\.pdf$/);
  expect(sanitizeFilename(`${'x'.repeat(300)}.csv`)).toBe(`${'x'.repeat(196)}.csv`);
});

test('a huge name is cut in one step', () => {
  // 1 MiB of multi-byte characters: the old character-by-character cut ran for hours on this (past any
  // test timeout); the cut is now one slice.
  const cut = sanitizeFilename('€'.repeat(1 << 20));
  expect(Buffer.byteLength(cut)).toBe(198);
  expect(cut).toBe('€'.repeat(66));
});

test('names repeat as "name (2).ext" within one request', () => {
  const name = uniqueNamer();
  expect([name('a.pdf'), name('A.pdf'), name('a.pdf'), name('b')]).toEqual(['a.pdf', 'A (2).pdf', 'a (3).pdf', 'b']);
});

test('a repeated name at the byte cap stays within it, its stem cut to make room for " (2)"', () => {
  const name = uniqueNamer();
  const long = sanitizeFilename(`${'é'.repeat(150)}.pdf`);
  expect(name(long)).toBe(long);
  const second = name(long);
  expect(Buffer.byteLength(second)).toBeLessThanOrEqual(200);
  expect(second).toMatch(/^é+ \(2\)\.pdf$/);
  const third = name(long);
  expect(third).toMatch(/^é+ \(3\)\.pdf$/);
  expect(Buffer.byteLength(third)).toBeLessThanOrEqual(200);
});
