import { MAX_PARAMETERS, MAX_SECTIONS, parseDisposition } from '../../services/triggers/webhook/content-disposition';
import { readText } from '../../services/triggers/webhook/text-charset';

/** A multipart part's Content-Disposition (content-disposition.ts); headers come as busboy hands them: Latin-1, a character a byte. */
const latin1 = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
const read = (header: string) => parseDisposition(latin1(header));

test('RFC 2231 sections are joined in order, then decoded once, in the charset section 0 names', () => {
  expect(read('form-data; name="doc"; filename*0="long"; filename*1="name.pdf"')).toEqual({ type: 'form-data', params: { name: 'doc', filename: 'longname.pdf' } });
  expect(read("form-data; name=doc; filename*1*=%20rates.pdf; filename*0*=UTF-8''%E2%82%AC")?.params.filename).toBe('€ rates.pdf');
  // A character split across sections, and encoded and plain sections mixed (RFC 2231 §4.1).
  expect(read("form-data; name=doc; filename*0*=utf-8'en'%E2%82; filename*1*=%AC; filename*2=\" rates.pdf\"")?.params.filename).toBe('€ rates.pdf');
  expect(read("form-data; name=doc; filename*0*=iso-8859-1''K%F6ln; filename*1=.txt")?.params.filename).toBe('Köln.txt');
  expect(read("form-data; name=doc; filename*0*=utf-16be''%00K%00%F6; filename*1*=%00.%00t")?.params.filename).toBe('Kö.t');
  // The name parameter is read the same way.
  expect(read('form-data; name*0="or"; name*1="der"')?.params.name).toBe('order');
});

test('RFC 5987 filename* is read before the sections and the plain filename; raw UTF-8 in a plain one is read as busboy read it', () => {
  expect(read("form-data; name=a; filename=\"fallback.pdf\"; filename*=UTF-8''%E2%82%AC%20rates.pdf")?.params.filename).toBe('€ rates.pdf');
  expect(read("form-data; name=a; filename*0=\"sec\"; filename*1=\"tions\"; filename=\"plain\"")?.params.filename).toBe('sections');
  expect(read('form-data; name="a"; filename="Grüße \\"quoted\\".txt"')?.params.filename).toBe('Grüße "quoted".txt');
  expect(read('form-data; name=a; filename=""')?.params.filename).toBe('');
  expect(read('form-data; name=a; filename="C:\\temp\\n\\\\x.txt"')?.params.filename).toBe('C:\\temp\\n\\x.txt');
  expect(read('form-data; name="a"; name="b"')?.params.name).toBe('a');
});

test('an extended form that cannot be read falls back to the plain filename, or is a problem in words of our own', () => {
  const cases: Array<[string, string]> = [
    ['filename*0="a"; filename*2="c"', 'its RFC 2231 sections skip a number'],
    ['filename*1="b"', 'its RFC 2231 sections skip a number'],
    ["filename*0*=utf-8''a; filename*0*=b", 'a section of it is sent twice'],
    ["filename*0*=utf-8''%E2%8", 'its RFC 5987/2231 form is not percent-encoded as it should be'],
    ["filename*=utf-8''a%ZZ.pdf", 'its RFC 5987/2231 form is not percent-encoded as it should be'],
    ["filename*=x-klingon''a.pdf", 'its RFC 5987/2231 form names a charset this service does not know'],
    ["filename*=''a.pdf", 'its RFC 5987/2231 form names a charset this service does not know'],
    ["filename*0*=utf-8''%E2%82; filename*1*=.pdf", 'its RFC 5987/2231 form has bytes that are not valid in its charset'],
    ['filename*=a.pdf', "its RFC 5987/2231 form has no charset'language' prefix"],
    ['filename*0="a"; filename*1*=%41', 'its first RFC 2231 section names no charset'],
    [Array.from({ length: MAX_SECTIONS + 1 }, (_, n) => `filename*${n}=x`).join('; '), `it is split into more than ${MAX_SECTIONS} sections (one is numbered ${MAX_SECTIONS} or more)`],
    // Malformed section numbers are problems too, not parameters dropped (the part would lose its file name).
    ['filename*0=a; filename*99999999999=x', `it is split into more than ${MAX_SECTIONS} sections (one is numbered ${MAX_SECTIONS} or more)`],
    ['filename*999999999=x', `it is split into more than ${MAX_SECTIONS} sections (one is numbered ${MAX_SECTIONS} or more)`],
    ['filename*0=a; filename*01=b', 'an RFC 2231 section number of it has a leading zero'],
    ['filename*00=a', 'an RFC 2231 section number of it has a leading zero'],
    ['filename**=a', 'a parameter of it is neither its RFC 5987 form nor an RFC 2231 section (`*` and a number)'],
    ['filename*x=a', 'a parameter of it is neither its RFC 5987 form nor an RFC 2231 section (`*` and a number)'],
    ['filename*0=a; filename*1x*=b', 'a parameter of it is neither its RFC 5987 form nor an RFC 2231 section (`*` and a number)'],
    ["filename*=x-user-defined''%41%80", 'its RFC 5987/2231 form names x-user-defined, a pass-through for binary bytes rather than a charset'],
  ];
  for (const [params, why] of cases) {
    expect({ params, read: read(`form-data; name="f"; ${params}; filename="plain.pdf"`) }).toEqual({ params, read: { type: 'form-data', params: { name: 'f', filename: 'plain.pdf' } } });
    expect({ params, read: read(`form-data; name="f"; ${params}`) }).toEqual({ params, read: {
      type: 'form-data', params: { name: 'f' }, problem: `a part's file name cannot be read: ${why}, and it has no plain filename to fall back on`,
    } });
  }
  // Exactly the cap is read.
  expect(read(`form-data; name=f; ${Array.from({ length: MAX_SECTIONS }, (_, n) => `filename*${n}=x`).join('; ')}`)?.params.filename).toBe('x'.repeat(MAX_SECTIONS));
  expect(read("form-data; name*=utf-8''%FF")?.problem).toBe("a part's name cannot be read: its RFC 5987/2231 form has bytes that are not valid in its charset, and it has no plain name to fall back on");
});

test('a header busboy could not read is still no disposition; other parameters are parsed, neither decoded nor kept', () => {
  for (const header of ['form-data; name', 'form-data; name="a', 'form-data name="a"', 'form-data; name="a";', 'form-data; =a', 'form-data; name=a b']) {
    expect({ header, read: read(header) }).toEqual({ header, read: undefined });
  }
  expect(read('Form-Data; Name="a"; size=12; x*=weird; y="q\\"x"')).toEqual({ type: 'form-data', params: { name: 'a' } });
  expect(read('attachment; filename="a.txt"')).toEqual({ type: 'attachment', params: { filename: 'a.txt' } });
});

test('utf-16 with no byte order named reads its byte order mark, and without one is refused (either guess garbles some sender); utf-16le and utf-16be keep theirs', () => {
  const bytes = (...b: number[]) => Buffer.from(b);
  for (const label of ['utf-16', 'UTF-16', 'ucs-2', 'unicode', 'csunicode', 'iso-10646-ucs-2', 'unicodefeff']) {
    expect({ label, read: readText(label, bytes(0xfe, 0xff, 0x00, 0x41)) }).toEqual({ label, read: { text: 'A' } });
    expect({ label, read: readText(label, bytes(0xff, 0xfe, 0x41, 0x00)) }).toEqual({ label, read: { text: 'A' } });
    // Big-endian by RFC 2781 §4.3, little-endian from .NET's Encoding.Unicode: not read as either.
    expect({ label, read: readText(label, bytes(0x00, 0x41, 0x00, 0x42)) }).toEqual({ label, read: { problem: 'no-byte-order' } });
    expect({ label, read: readText(label, bytes(0x41, 0x00, 0x42, 0x00)) }).toEqual({ label, read: { problem: 'no-byte-order' } });
    expect({ label, read: readText(label, bytes()) }).toEqual({ label, read: { text: '' } });
    expect({ label, read: readText(label, bytes(0xfe, 0xff, 0x00)) }).toEqual({ label, read: { problem: 'invalid-bytes' } });
  }
  expect(readText('utf-16le', bytes(0xff, 0xfe, 0x41, 0x00))).toEqual({ text: '\ufeffA' });
  expect(readText('utf-16be', bytes(0xfe, 0xff, 0x00, 0x41))).toEqual({ text: '\ufeffA' });
  expect(readText('utf-16le', bytes(0x41, 0x00))).toEqual({ text: 'A' });
  expect(readText('x-user-defined', bytes(0x41, 0x80))).toEqual({ problem: 'binary-charset' });
  expect(readText('x-klingon', bytes(0x41))).toEqual({ problem: 'unknown-charset' });
  expect(readText('iso-2022-kr', bytes(0x41))).toEqual({ problem: 'unknown-charset' });
  // The file name's charset is read by the same helper.
  expect(read("form-data; name=a; filename*=utf-16''%FE%FF%00K%00%F6")?.params.filename).toBe('Kö');
  expect(read("form-data; name=a; filename*0*=unicode''%FF%FEK%00; filename*1*=%F6%00")?.params.filename).toBe('Kö');
  expect(parseDisposition("form-data; name=a; filename*0*=unicode''%00K; filename*1*=%00%F6")?.problem)
    .toBe("a part's file name cannot be read: its RFC 5987/2231 form is in utf-16 without a byte order mark (name utf-16le or utf-16be, or send a byte order mark), and it has no plain filename to fall back on");
});

test('a plain name or filename is strict UTF-8: a Latin-1 byte falls back to an extended form, else is a problem', () => {
  expect(parseDisposition('form-data; name="a"; filename="K\xf6ln.txt"; filename*=utf-8\'\'K%C3%B6ln.txt')?.params.filename).toBe('Köln.txt');
  expect(parseDisposition('form-data; name="a"; filename="K\xf6ln.txt"')).toEqual({ type: 'form-data', params: { name: 'a' }, problem: "a part's file name is not valid UTF-8" });
  expect(parseDisposition('form-data; name="K\xf6ln"')).toEqual({ type: 'form-data', params: {}, problem: "a part's name is not valid UTF-8" });
  expect(parseDisposition("form-data; name=\"K\xf6ln\"; name*=x-klingon''a")?.problem)
    .toBe("a part's name cannot be read: its RFC 5987/2231 form names a charset this service does not know, and its plain name is not valid UTF-8");
  // Sections with no encoded one are plain text, UTF-8 like a plain filename.
  expect(parseDisposition('form-data; name=a; filename*0="K\xf6"; filename*1="ln"; filename="plain.txt"')?.params.filename).toBe('plain.txt');
  expect(parseDisposition('form-data; name=a; filename*0="K\xf6"; filename*1="ln"')?.problem)
    .toBe("a part's file name cannot be read: its RFC 2231 sections are not valid UTF-8, and it has no plain filename to fall back on");
  // Two Latin-1 names no longer collapse into one property (both were "K\ufffdln").
  expect(parseDisposition('form-data; name="K\xe4ln"')?.params.name).toBeUndefined();
});

test('a name with a control or format character is a problem: it would reach the workflow as a property name', () => {
  const why = "a part's name has a control or format character (Unicode Cc or Cf) in it, which the workflow would get in a property name";
  for (const header of ["form-data; name*=UTF-8''a%0Ab%00", "form-data; name*=UTF-8''a%E2%80%8Eb", 'form-data; name="a\tb"', "form-data; name*0*=utf-8''a%7F; name*1=b"]) {
    expect({ header, read: read(header) }).toEqual({ header, read: { type: 'form-data', params: {}, problem: why } });
  }
  expect(read("form-data; name*=UTF-8''a%0Ab; filename=x.txt")).toEqual({ type: 'form-data', params: { filename: 'x.txt' }, problem: why });
});

test(`more than ${MAX_PARAMETERS} parameters is a problem, whichever they are; the cap is read`, () => {
  const params = (n: number) => Array.from({ length: n }, (_, i) => `p${i}=v`).join('; ');
  expect(read(`form-data; name=a; ${params(MAX_PARAMETERS - 1)}`)).toEqual({ type: 'form-data', params: { name: 'a' } });
  expect(read(`form-data; name=a; ${params(MAX_PARAMETERS)}`)).toEqual({ type: 'form-data', params: {}, problem: `a part's Content-Disposition has more than ${MAX_PARAMETERS} parameters` });
  // Both parameters at the most sections, and every other form of them, fit.
  const both = ['name', 'filename'].flatMap((base) => [`${base}=x`, `${base}*=utf-8''x`, ...Array.from({ length: MAX_SECTIONS }, (_, n) => `${base}*${n}=y`)]);
  expect(both).toHaveLength(MAX_PARAMETERS);
  expect(read(`form-data; ${both.join('; ')}`)).toEqual({ type: 'form-data', params: { name: 'x', filename: 'x' } });
});
