import { checkJsonText } from '../../services/triggers/webhook/json-syntax';
import { MAX_JSON_DEPTH, jsonNestsDeeperThan } from '../../services/triggers/json-depth';

const isJsonText = (bytes: Buffer) => checkJsonText(bytes) === 'json';

/** The reference: what the receiver did before, `JSON.parse` of the UTF-8 decoding. */
function parses(bytes: Buffer): boolean {
  try { JSON.parse(bytes.toString('utf8')); return true; } catch { return false; }
}

const agree = (text: string | Buffer) => {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  expect({ text: bytes.toString('latin1'), valid: isJsonText(bytes) }).toEqual({ text: bytes.toString('latin1'), valid: parses(bytes) });
};

const SAMPLES = [
  '{}', '[]', '""', '0', '-0', '1', '-1', '1.5', '1e5', '1E+5', '1e-5', '-0.0e0', 'true', 'false', 'null',
  ' \t\r\n{ "a" : [ 1 , 2 , { "b" : null } ] , "c" : "d" } \n',
  '{"a":"\\u00e9\\n\\"\\\\\\/\\b\\f\\r\\t"}', '"é ünïcödé 🎉"', '[[[[[]]]]]', '{"":{"":{"":[]}}}',
  '{"id":"evt-0001","lines":[{"sku":"SKU-0","qty":1,"price":"9.99"}]}',
  // refused by JSON.parse:
  '', ' ', '{', '}', '[', ']', '{]', '[}', '{"a"}', '{"a":}', '{"a":1,}', '[1,]', '[,1]', '{,}', '{"a" 1}', '{a:1}', "{'a':1}",
  '01', '1.', '.5', '-', '+1', '1e', '1e+', '0x10', 'NaN', 'Infinity', 'tru', 'nul', 'truex', 'True', '"a', '"\\x"', '"\\u12"', '"\\u12g4"',
  '"tab\there"', '"line\nbreak"', '1 2', '{} {}', '[1] x', '\u00a0{}', '\ufeff{}', '{"a":1}\u0000', '//c\n{}', '[1 , 2', '"\\',
];

test('it agrees with JSON.parse on valid and invalid texts', () => {
  for (const sample of SAMPLES) agree(sample);
});

test('bytes of 0x80 and above: inside strings as JSON.parse sees their decoding, never outside', () => {
  agree(Buffer.from([0x22, 0xff, 0xfe, 0x22])); // invalid UTF-8 inside a string decodes to U+FFFD: valid
  agree(Buffer.from([0x22, 0xc3, 0x22])); // a truncated sequence inside a string
  agree(Buffer.from([0x5b, 0xc3, 0xa9, 0x5d])); // é outside a string
  agree(Buffer.from([0x7b, 0x7d, 0x80])); // a stray continuation byte after the value
  agree(Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x7d])); // a UTF-8 byte-order mark
});

test(`nesting deeper than ${MAX_JSON_DEPTH} levels is its own verdict, judged without recursion`, () => {
  const nested = (depth: number, innermost: string) => '[{"a":'.repeat(depth / 2) + innermost + '}]'.repeat(depth / 2);
  for (const [text, verdict, deeper] of [
    [nested(MAX_JSON_DEPTH, '1'), 'json', false],
    [nested(MAX_JSON_DEPTH - 2, '[[]]'), 'json', false],
    [nested(MAX_JSON_DEPTH - 2, '[[[]]]'), 'too-deep', true],
    [nested(MAX_JSON_DEPTH, '{}'), 'too-deep', true],
    ['['.repeat(200_000) + ']'.repeat(200_000), 'too-deep', true],
    // Brackets inside strings, escaped quotes included, are text.
    [`[${'"[\\"[{",'.repeat(MAX_JSON_DEPTH)}1]`, 'json', false],
    [nested(MAX_JSON_DEPTH - 2, '["\\"]","{[{"]'), 'json', false],
  ] as const) {
    expect({ depth: text.length, verdict: checkJsonText(Buffer.from(text)) }).toEqual({ depth: text.length, verdict });
    expect({ depth: text.length, deeper: jsonNestsDeeperThan(text) }).toEqual({ depth: text.length, deeper });
  }
  expect(checkJsonText(Buffer.from('['.repeat(100) + ']'.repeat(99)))).toBe('not-json');
});

test('it agrees with JSON.parse on random mutations of JSON texts', () => {
  // A fixed-seed generator, so a failure can be reproduced.
  let seed = 42;
  const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x80000000);
  const alphabet = Buffer.from('{}[]",:0123456789-+.eEtruefalsn \\/u\t\n\r\x01\xff');
  const bases = SAMPLES.filter((s) => s.length > 2).map((s) => Buffer.from(s, 'utf8'));
  let valid = 0;
  for (let n = 0; n < 20_000; n++) {
    const bytes = Buffer.from(bases[Math.floor(random() * bases.length)]);
    const edits = 1 + Math.floor(random() * 3);
    let mutated: Buffer = bytes;
    for (let e = 0; e < edits; e++) {
      const at = Math.floor(random() * (mutated.length + 1));
      const byte = alphabet[Math.floor(random() * alphabet.length)];
      const kind = random();
      mutated = kind < 0.33 ? Buffer.concat([mutated.subarray(0, at), Buffer.from([byte]), mutated.subarray(at)])
        : kind < 0.66 ? Buffer.concat([mutated.subarray(0, at), mutated.subarray(at + 1)])
          : Buffer.concat([mutated.subarray(0, at), Buffer.from([byte]), mutated.subarray(at + 1)]);
    }
    if (parses(mutated)) valid++;
    agree(mutated);
  }
  // The mutations must exercise both answers, or the comparison proves little.
  expect(valid).toBeGreaterThan(500);
  expect(valid).toBeLessThan(19_500);
});
