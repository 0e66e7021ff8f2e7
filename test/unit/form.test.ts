import { parseForm } from '../../services/triggers/webhook/form';

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
