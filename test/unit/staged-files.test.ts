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

test('a name past the first cut keeps its extension, and no cut leaves half of a character outside the BMP', () => {
  expect(sanitizeFilename(`${'A'.repeat(5000)}.pdf`)).toBe(`${'A'.repeat(196)}.pdf`);
  expect(sanitizeFilename(`${'A'.repeat(797)}.pdf`)).toBe(`${'A'.repeat(196)}.pdf`);
  const emoji = sanitizeFilename(`${'a'.repeat(790)}.${'😀'.repeat(5)}`);
  expect(emoji).toBe(`${'a'.repeat(179)}.${'😀'.repeat(5)}`);
  expect(Buffer.from(emoji, 'utf8').toString('utf8')).toBe(emoji);
  const many = sanitizeFilename('😀'.repeat(500));
  expect(Buffer.from(many, 'utf8').toString('utf8')).toBe(many);
  expect(sanitizeFilename('half\ud83d.txt')).toBe('half.txt');
});

test('characters that render as nothing are removed: soft hyphen, tag characters, fillers', () => {
  expect(sanitizeFilename('in\u00advoice\u{e0041}\u3164\u115f\u180e.pdf')).toBe('invoice.pdf');
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

test('invisible characters (zero-width, bidi marks, byte order mark, line separators) are removed too', () => {
  expect(sanitizeFilename('in\u200Bvo\u061Cice\uFEFF\u2028.pdf')).toBe('invoice.pdf');
  expect(sanitizeFilename('a\u2066b\u2069c\u200Dd.txt')).toBe('abcd.txt');
});

test("Windows' reserved characters become _ and its device names are prefixed, so a staged file can be saved anywhere", () => {
  expect(sanitizeFilename('report: Q3 <final>?.pdf')).toBe('report_ Q3 _final__.pdf');
  expect(sanitizeFilename('a|b*"c".txt')).toBe('a_b__c_.txt');
  expect(sanitizeFilename('CON')).toBe('_CON');
  expect(sanitizeFilename('nul.txt')).toBe('_nul.txt');
  expect(sanitizeFilename('com1.x12')).toBe('_com1.x12');
  expect(sanitizeFilename('console.log')).toBe('console.log');
  expect(sanitizeFilename('com10.txt')).toBe('com10.txt');
});

test("the console's CONIN$ and CONOUT$, CLOCK$, superscript COM¹/LPT³ and a device name with spaces before its dot are prefixed too", () => {
  for (const name of ['CONIN$', 'conout$.txt', 'CLOCK$', 'COM¹.txt', 'lpt³', 'CON .txt', 'nul  .tar.gz', 'Com² .log']) {
    expect({ name, sanitized: sanitizeFilename(name) }).toEqual({ name, sanitized: `_${name}` });
  }
  for (const name of ['conin$x.txt', 'CONIN', 'clock.txt', 'COM⁴.txt', 'con x.txt', 'nul_.txt']) {
    expect({ name, sanitized: sanitizeFilename(name) }).toEqual({ name, sanitized: name });
  }
});

test('a name cut to 200 bytes never ends in a dot or a space, even where the extension is too long to keep', () => {
  const cutAtDot = sanitizeFilename(`${'A'.repeat(199)}.${'B'.repeat(100)}`);
  expect(cutAtDot).toBe('A'.repeat(199));
  const cutAtSpace = sanitizeFilename(`${'A'.repeat(199)} ${'B'.repeat(100)}`);
  expect(cutAtSpace).toBe('A'.repeat(199));
});

test('a repeated name whose "extension" is too long to keep gets its number at the end, within the cap and without a leading space', () => {
  const name = uniqueNamer();
  const long = sanitizeFilename(`a.${'x'.repeat(197)}`);
  expect(name(long)).toBe(long);
  const second = name(long);
  expect(second).toMatch(/^a\.x+ \(2\)$/);
  expect(Buffer.byteLength(second)).toBeLessThanOrEqual(200);
  expect([name('report.final.pdf'), name('report.final.pdf')]).toEqual(['report.final.pdf', 'report.final (2).pdf']);
});
