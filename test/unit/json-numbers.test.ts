import { parseKeepingNumbers } from '../../services/triggers/json-numbers';
import { decodeInMemory } from '../../services/triggers/webhook/decode';

/** What the webhook decoder writes for a JSON body's numbers (docs/webhook.md, "Bodies"). */
const decoded = (text: string) => JSON.stringify(decodeInMemory(Buffer.from(text), 'json', undefined));

test('a number a double would change comes out as written: past 2^53, past its range, more digits than it holds', () => {
  // JSON.parse then JSON.stringify made these 1.2345678901234568e+29, 9007199254740992, null, 0 and 0.12345678901234568.
  for (const n of ['123456789012345678901234567890', '9007199254740993', '-18446744073709551617', '1e400', '-1E+400', '1e-400', '0.1234567890123456789', '1.00000000000000001']) {
    expect({ n, out: decoded(`{"id":${n},"list":[${n}, ${n}]}`) }).toEqual({ n, out: `{"id":${n},"list":[${n},${n}]}` });
  }
  expect(decoded('123456789012345678901234567890')).toBe('123456789012345678901234567890');
  // Whitespace of every kind between the punctuation (or the start) and the number, and a sign.
  expect(decoded(' \r\n\t-1e400')).toBe('-1e400');
  expect(decoded('{"a" :\n\t 12345678901234567890,\r\n"b":[\n-9007199254740993]}')).toBe('{"a":12345678901234567890,"b":[-9007199254740993]}');
});

test('numbers a double holds come out as before, whatever way they were written', () => {
  for (const [text, out] of [['1.0', '1'], ['1e2', '100'], ['1.50E+2', '150'], ['9007199254740992', '9007199254740992'], ['0.1', '0.1'], ['-0.000001', '-0.000001'],
    ['1e21', '1e+21'], ['1234567890.123456', '1234567890.123456'], ['5e-324', '5e-324'], ['0e9999', '0'], ['12345.678901234567', '12345.678901234567']]) {
    expect({ text, out: decoded(`[${text}]`) }).toEqual({ text, out: `[${out}]` });
  }
  // Digits in strings are strings; a string that only looks like a number token costs the slower parse, nothing else.
  expect(decoded('{"card":"4111111111111111111","t":",12345678901234567e5"}')).toBe('{"card":"4111111111111111111","t":",12345678901234567e5"}');
});

test('the value is otherwise what JSON.parse makes: prototype keys are own properties, repeats keep the last', () => {
  const value = parseKeepingNumbers('{"__proto__":{"x":1},"a":1,"a":12345678901234567890}') as Record<string, unknown>;
  expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
  expect(Object.keys(value)).toEqual(['__proto__', 'a']);
  expect(JSON.stringify(value)).toBe('{"__proto__":{"x":1},"a":12345678901234567890}');
});
