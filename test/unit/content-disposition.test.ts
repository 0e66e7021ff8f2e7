import { MAX_SECTIONS, parseDisposition } from '../../services/triggers/webhook/content-disposition';

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
    [Array.from({ length: MAX_SECTIONS + 1 }, (_, n) => `filename*${n}=x`).join('; '), `it is split into more than ${MAX_SECTIONS} sections`],
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

test('a header busboy could not read is still no disposition; other parameters are kept and not decoded', () => {
  for (const header of ['form-data; name', 'form-data; name="a', 'form-data name="a"', 'form-data; name="a";', 'form-data; =a', 'form-data; name=a b']) {
    expect({ header, read: read(header) }).toEqual({ header, read: undefined });
  }
  expect(read('Form-Data; Name="a"; size=12; x*=weird')).toEqual({ type: 'form-data', params: { name: 'a', size: '12' } });
  expect(read('attachment; filename="a.txt"')).toEqual({ type: 'attachment', params: { filename: 'a.txt' } });
});
