import { DEFAULT_FORM_MAX_FIELDS, formFieldCounter, formFieldsValidator, parseForm, tooManyFormFields } from '../../services/triggers/webhook/form';

/** application/x-www-form-urlencoded as the webhook decodes it (docs/webhook.md, "Bodies"). */
test('repeated fields become arrays in order; prototype names are plain fields; + and escapes are decoded in the charset', () => {
  const form = parseForm(Buffer.from('a=1&__proto__=p&constructor=c&a=2&a%5Bb%5D=x+y&caf%C3%A9=%E9&&flag'), undefined);
  expect(JSON.stringify(form)).toBe('{"a":["1","2"],"__proto__":"p","constructor":"c","a[b]":"x y","café":"\ufffd","flag":""}');
  expect(Object.getPrototypeOf(form)).toBe(Object.prototype);
  expect(parseForm(Buffer.from('caf%E9=%E9t%E9'), 'iso-8859-1')).toEqual({ café: 'été' });
});

test('ASCII fields without escapes, most of any form, are taken as they are: no Buffer round trip for each', () => {
  // Each pair through a Buffer cost a 1.3 MB form of 680,000 pairs over 3 s of the decoder's time.
  const from = jest.spyOn(Buffer, 'from');
  try {
    const form = parseForm(Buffer.from('a&'.repeat(1000) + 'b=1&c=x%20y'), undefined);
    expect((form.a as string[]).length).toBe(1000);
    expect(form).toMatchObject({ b: '1', c: 'x y' });
    expect(from.mock.calls.length).toBeLessThanOrEqual(2); // the escaped value, and its name maybe
  } finally {
    from.mockRestore();
  }
});

test('a form of more pairs than its bound is payload-too-large; empty pairs do not count, a repeated name counts each time', () => {
  const pairs = (n: number) => Array.from({ length: n }, (_, i) => `k${i % 7}=${i}`).join('&');
  expect(Object.values(parseForm(Buffer.from(pairs(DEFAULT_FORM_MAX_FIELDS)), undefined)).flat()).toHaveLength(DEFAULT_FORM_MAX_FIELDS);
  expect(() => parseForm(Buffer.from(pairs(DEFAULT_FORM_MAX_FIELDS + 1)), undefined)).toThrow(expect.objectContaining({ code: 'payload-too-large', message: tooManyFormFields(DEFAULT_FORM_MAX_FIELDS) }));
  expect(parseForm(Buffer.from('&&a=1&&&b&&'), undefined, 2)).toEqual({ a: '1', b: '' });
  expect(() => parseForm(Buffer.from('a&a&a'), undefined, 2)).toThrow(tooManyFormFields(2));
  // The reviewer's form: 8 MB of 579,365 `%6bN=%41` pairs, which fits the decoded-size bound.
  expect(() => parseForm(Buffer.from(Array.from({ length: 579_365 }, (_, i) => `%6b${i}=%41`).join('&')), undefined)).toThrow(tooManyFormFields(DEFAULT_FORM_MAX_FIELDS));
});

test("the receiver's streaming count of a form's pairs is parseForm's, wherever the chunks split it", () => {
  let seed = 7;
  const next = (n: number) => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n; };
  for (let n = 0; n < 500; n++) {
    const text = Array.from({ length: next(30) }, () => ['a', '=', '&', '&&', '%26', 'b=c', ''][next(7)]).join('');
    const bytes = Buffer.from(text);
    const counter = formFieldCounter();
    for (let at = 0; at < bytes.length; ) { const size = 1 + next(4); counter.write(bytes.subarray(at, at + size)); at += size; }
    const expected = [...new URLSearchParams(text)].length;
    expect({ text, count: counter.end() }).toEqual({ text, count: expected });
    expect(() => parseForm(bytes, undefined, expected)).not.toThrow();
    if (expected > 0) expect(() => parseForm(bytes, undefined, expected - 1)).toThrow(tooManyFormFields(expected - 1));
  }
});

test("the receiver's validator answers 413 past the bound, at once, and nothing up to it", () => {
  const verdict = (chunks: string[], max: number) => { const v = formFieldsValidator(max); for (const c of chunks) v.write(Buffer.from(c)); return v.end(); };
  expect(verdict(['a=1&b', '=2&', '&c'], 3)).toBeNull();
  expect(verdict(['a=1&b', '=2&', '&c&d'], 3)).toEqual(expect.objectContaining({ status: 413, body: JSON.stringify({ error: 'payload-too-large', message: tooManyFormFields(3) }) }));
});
