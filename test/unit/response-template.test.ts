import { validateHeaderValue } from 'node:http';
import {
  MAX_OUTPUT_BYTES,
  MAX_PLACEHOLDERS,
  MAX_TEMPLATE_BYTES,
  TEMPLATE_CACHE_ENTRIES,
  TemplateError,
  compileTemplate,
  compileTemplateCached,
  createTemplateCache,
  templateCache,
  type RenderMode,
  type TemplateScope,
} from '../../services/triggers/webhook/response-template';
import { parseKeepingNumbers } from '../../services/triggers/json-numbers';

const scope = (overrides: Partial<TemplateScope> = {}): TemplateScope => ({
  $request: { id: 'req-123', receivedAt: '2024-05-01T10:00:00.000Z' },
  $headers: { 'x-correlation-id': 'corr-9', accept: 'application/json', 'content-type': 'application/json' },
  $query: { page: '2', tag: ['red', 'blue'] },
  $params: { workflowId: 'wf-orders', path: 'orders/42' },
  $json: {
    order: { id: 42, total: 19.5, paid: true },
    items: [{ sku: 'A-1', qty: 2 }, { sku: 'B-2', qty: 1 }],
    'first name': 'Ada',
    "it's": 'quoted',
    'a-b': [{ c: 'deep' }],
    count: 3,
    paid: false,
    nothing: null,
    note: 'plain',
  },
  ...overrides,
});

const render = (template: string, mode: RenderMode = 'text', s: TemplateScope = scope()) => compileTemplate(template).render(s, mode);

const compileError = (template: string): TemplateError => {
  try {
    compileTemplate(template);
  } catch (err) {
    expect(err).toBeInstanceOf(TemplateError);
    return err as TemplateError;
  }
  throw new Error(`expected ${JSON.stringify(template)} not to compile`);
};

describe('path look-ups', () => {
  it.each([
    ['dot accessors', '{{ $request.id }}', 'req-123'],
    ['no whitespace', '{{$request.receivedAt}}', '2024-05-01T10:00:00.000Z'],
    ['whitespace and newlines around the expression', '{{ \n\t $params.workflowId \r\n }}', 'wf-orders'],
    ['single-quoted bracket', "{{ $headers['x-correlation-id'] }}", 'corr-9'],
    ['double-quoted bracket with a space in the name', '{{ $json["first name"] }}', 'Ada'],
    ['escaped quote inside a bracket name', "{{ $json['it\\'s'] }}", 'quoted'],
    ['whitespace inside brackets', "{{ $json[ 'first name' ] }}", 'Ada'],
    ['index accessor', '{{ $json.items[1].sku }}', 'B-2'],
    ['index then dot then bracket', "{{ $json['a-b'][0].c }}", 'deep'],
    ['index into a $query array', '{{ $query.tag[0] }}', 'red'],
    ['a $query string', '{{ $query.page }}', '2'],
    ['$params.path', '{{ $params.path }}', 'orders/42'],
    ['literal text around placeholders', 'id={{ $request.id }}; wf={{ $params.workflowId }}', 'id=req-123; wf=wf-orders'],
    ['a "}}" inside a bracket name does not close the placeholder', "{{ $json['x}}y'] }}!", '!'],
  ])('%s', (_name, template, expected) => {
    expect(render(template)).toBe(expected);
  });

  it('looks headers up case-insensitively', () => {
    expect(render("{{ $headers['X-Correlation-Id'] }}")).toBe('corr-9');
    expect(render('{{ $headers["X-CORRELATION-ID"] }}')).toBe('corr-9');
    expect(render('{{ $headers.Accept }}')).toBe('application/json');
  });

  it('renders numbers and booleans with String(), objects and arrays as JSON', () => {
    expect(render('{{ $json.count }}')).toBe('3');
    expect(render('{{ $json.order.total }}')).toBe('19.5');
    expect(render('{{ $json.order.paid }}|{{ $json.paid }}')).toBe('true|false');
    expect(render('{{ $json.order }}')).toBe('{"id":42,"total":19.5,"paid":true}');
    expect(render('{{ $query.tag }}')).toBe('["red","blue"]');
    expect(render('{{ $params }}')).toBe('{"workflowId":"wf-orders","path":"orders/42"}');
  });

  it('renders $params.path null as empty', () => {
    expect(render('[{{ $params.path }}]', 'text', scope({ $params: { workflowId: 'wf', path: null } }))).toBe('[]');
  });

  it.each([
    ['unknown root', '{{ $body.id }}'],
    ['unknown root without $', '{{ process.env }}'],
    ['unknown property', '{{ $json.missing }}'],
    ['path through a missing property', '{{ $json.missing.deeper[0] }}'],
    ['stepping into null', '{{ $json.nothing.x }}'],
    ['stepping into a string', '{{ $request.id.length }}'],
    ['stepping into a number', '{{ $json.count.x }}'],
    ['index past the end', '{{ $json.items[5].sku }}'],
    ['null value', '{{ $json.nothing }}'],
    ['unknown header', "{{ $headers['x-absent'] }}"],
  ])('renders empty for %s', (_name, template) => {
    expect(render(`<${template}>`)).toBe('<>');
  });

  it('renders a number kept as written (json-numbers.ts) as its digits, and steps into it as into a number', () => {
    const s = scope({ $json: parseKeepingNumbers('{"id":9007199254740993,"ids":[123456789012345678901234567890]}') });
    expect(render('{{ $json.id }}|{{ $json.ids[0] }}', 'text', s)).toBe('9007199254740993|123456789012345678901234567890');
    expect(render('{"id":{{ $json.id }},"s":"{{ $json.id }}","ids":{{ $json.ids }}}', 'json', s))
      .toBe('{"id":9007199254740993,"s":"9007199254740993","ids":[123456789012345678901234567890]}');
    expect(render('{{ $json.id }}', 'body', s)).toBe('9007199254740993');
    expect(render('<{{ $json.id.rawJSON }}>', 'text', s)).toBe('<>');
    expect(render('{{ $json.id.rawJSON }}', 'json', s)).toBe('null');
    expect(render('"{{ $json.ids[0].rawJSON }}"', 'json', s)).toBe('""');
  });

  it('renders empty when there is no JSON body', () => {
    expect(render('<{{ $json.order.id }}>', 'text', scope({ $json: undefined }))).toBe('<>');
  });

  it('never throws at render for values JSON cannot represent', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const s = scope({ $json: { cyclic, big: BigInt(12), fn: () => 1, nested: { big: BigInt(1) } } });
    expect(render('<{{ $json.cyclic }}|{{ $json.big }}|{{ $json.fn }}|{{ $json.nested }}>', 'text', s)).toBe('<|12||>');
    expect(JSON.parse(render('[{{ $json.cyclic }},{{ $json.big }},{{ $json.fn }},{{ $json.nested }}]', 'json', s))).toEqual([null, 12, null, null]);
  });

  it('exposes the parsed expressions', () => {
    const t = compileTemplate(`{"id":"{{ $request.id }}","h":{{ $headers['X-A'] }}}`);
    expect(t.expressions).toEqual([
      { source: '$request.id', position: 7, root: '$request', keys: ['id'], inJsonString: true },
      { source: "$headers['X-A']", position: 30, root: '$headers', keys: ['x-a'], inJsonString: false },
    ]);
  });
});

describe("mode 'json'", () => {
  const nasty = 'He said "hi" \\ C:\\temp\nnext line\t\u0001 </script> \u2028 é €';

  it('escapes values inside a JSON string literal', () => {
    const s = scope({ $headers: { 'x-note': nasty } });
    const out = render(`{"note":"{{ $headers['x-note'] }}","wrapped":"[{{ $headers['x-note'] }}]"}`, 'json', s);
    expect(JSON.parse(out)).toEqual({ note: nasty, wrapped: `[${nasty}]` });
  });

  it('escapes objects and numbers inside strings as their text', () => {
    const out = render('{"order":"{{ $json.order }}","count":"{{ $json.count }}","missing":"{{ $json.nope }}","nil":"{{ $json.nothing }}"}', 'json');
    expect(JSON.parse(out)).toEqual({ order: '{"id":42,"total":19.5,"paid":true}', count: '3', missing: '', nil: '' });
  });

  it('substitutes JSON values outside string literals', () => {
    const out = render(
      '{"order": {{ $json.order }}, "count": {{ $json.count }}, "paid": {{ $json.paid }}, "name": {{ $json["first name"] }}, ' +
        '"tags": {{ $query.tag }}, "missing": {{ $json.nope }}, "nil": {{ $json.nothing }}, "path": {{ $params.path }} }',
      'json',
      scope({ $params: { workflowId: 'wf', path: null } }),
    );
    expect(JSON.parse(out)).toEqual({
      order: { id: 42, total: 19.5, paid: true },
      count: 3,
      paid: false,
      name: 'Ada',
      tags: ['red', 'blue'],
      missing: null,
      nil: null,
      path: null,
    });
  });

  it('renders a realistic Response Data template to valid JSON', () => {
    const template = `{
  "received": "{{ $request.id }}",
  "receivedAt": "{{ $request.receivedAt }}",
  "workflow": "{{ $params.workflowId }}",
  "path": "/{{ $params.path }}",
  "correlationId": "{{ $headers['X-Correlation-Id'] }}",
  "order": {{ $json.order }},
  "firstItem": {"sku": "{{ $json.items[0].sku }}", "qty": {{ $json.items[0].qty }}},
  "tags": {{ $query.tag }},
  "greeting": "Thanks, {{ $json["first name"] }} \\"{{ $json.note }}\\"!",
  "unknown": {{ $json.not.there }}
}`;
    const s = scope({
      $headers: { 'x-correlation-id': '","admin":true,"x":"\\' },
      $json: { ...(scope().$json as object), 'first name': 'Ada "the first"\nLovelace' },
    });
    const parsed = JSON.parse(render(template, 'json', s));
    expect(parsed).toEqual({
      received: 'req-123',
      receivedAt: '2024-05-01T10:00:00.000Z',
      workflow: 'wf-orders',
      path: '/orders/42',
      correlationId: '","admin":true,"x":"\\',
      order: { id: 42, total: 19.5, paid: true },
      firstItem: { sku: 'A-1', qty: 2 },
      tags: ['red', 'blue'],
      greeting: 'Thanks, Ada "the first"\nLovelace "plain"!',
      unknown: null,
    });
    expect(parsed).not.toHaveProperty('admin');
  });

  it('tracks escaped quotes and backslashes in the literal text', () => {
    const s = scope({ $json: { s: 'a"b', n: 7 } });
    // \" inside the string does not end it, so the placeholder is still inside the string.
    expect(JSON.parse(render('{"a":"say \\"{{ $json.s }}\\" ok"}', 'json', s))).toEqual({ a: 'say "a"b" ok' });
    // "x\\" ends with an escaped backslash, so the string is closed and the placeholder is a value.
    expect(JSON.parse(render('{"a":"x\\\\","b":{{ $json.n }}}', 'json', s))).toEqual({ a: 'x\\', b: 7 });
    // Quotes inside a placeholder's own brackets do not count as literal text.
    expect(JSON.parse(render('{"a":"{{ $json["s"] }}","b":{{ $json.n }}}', 'json', s))).toEqual({ a: 'a"b', b: 7 });
  });

  it('keeps a dangling backslash before a placeholder from eating the escape', () => {
    const s = scope({ $json: { dir: '"evil' } });
    expect(JSON.parse(render('{"p":"C:\\{{ $json.dir }}"}', 'json', s))).toEqual({ p: 'C:\\"evil' });
  });

  it('refuses a \\u escape that a placeholder would complete (found by review: a partner value made the JSON invalid)', () => {
    for (const template of ['{"a": "\\u{{$json.x}}"}', '{"a": "\\u00{{$json.x}}"}', '{"a": "x\\u123{{$json.x}}"}']) {
      expect(() => compileTemplate(template)).toThrow(/cut short by a placeholder/);
    }
    // A whole escape, an escaped backslash before a u, and a \\u outside a string are not cut short.
    for (const template of ['{"a": "\\u00e9{{$json.x}}"}', '{"a": "\\\\u{{$json.x}}"}', '{"a{{$json.x}}": 1}']) expect(() => compileTemplate(template)).not.toThrow();
    // A quote that cuts an escape short still ends the string: the placeholder after it is a value, not text.
    expect(compileTemplate('{"a":"\\u12", "b": {{$json.x}}}').expressions[0].inJsonString).toBe(false);
  });

  it('reads the literal text after such a placeholder as the rendered JSON has it (found by review)', () => {
    // The scanner took the dangling backslash to escape the closing quote, and read every later placeholder's
    // place (in a string or not) the wrong way round: partner data could add members or change types.
    const template = '{"path": "C:\\{{$json.dir}}", "note": "{{$json.note}}", "ok": true, "n": {{$json.n}}}';
    for (const note of ['hello', '{", ":":"}', 'true', { a: 1 }]) {
      const s = scope({ $json: { dir: 'in', note, n: 'x' } });
      const out = JSON.parse(render(template, 'json', s));
      expect(out).toEqual({ path: 'C:\\in', note: typeof note === 'string' ? note : JSON.stringify(note), ok: true, n: 'x' });
    }
  });

  it('handles placeholders in keys and closing braces right after a placeholder', () => {
    const s = scope({ $json: { key: 'k"1', n: 5 } });
    expect(JSON.parse(render('{"{{ $json.key }}":{"n":{{ $json.n }}}}', 'json', s))).toEqual({ 'k"1': { n: 5 } });
  });
});

describe("mode 'text' (header values)", () => {
  it('substitutes strings without quoting', () => {
    expect(render('id {{ $request.id }}', 'text')).toBe('id req-123');
  });

  it('strips CR and LF so a header cannot be split', () => {
    const s = scope({ $headers: { 'x-correlation-id': 'abc\r\nSet-Cookie: session=stolen\r\n\r\n<html>' } });
    const out = render("{{ $headers['x-correlation-id'] }}", 'text', s);
    expect(out).toBe('abcSet-Cookie: session=stolen<html>');
    expect(out).not.toMatch(/[\r\n]/);
    expect(() => validateHeaderValue('x-correlation-id', out)).not.toThrow();
  });

  it('strips other control characters, also from the literal text', () => {
    const s = scope({ $json: { v: 'a\u0000b\tc\u007fd\u0085e\u001bf' } });
    expect(render('x\r\n{{ $json.v }}\n', 'text', s)).toBe('xabcdef');
  });

  it('keeps Latin-1 and replaces characters Node cannot put in a header', () => {
    const s = scope({ $json: { v: 'café € 😀' } });
    const out = render('{{ $json.v }}', 'text', s);
    expect(out).toBe('café ? ?');
    expect(() => validateHeaderValue('x-v', out)).not.toThrow();
  });
});

describe('prototype safety', () => {
  const protoKeys = () => Object.getOwnPropertyNames(Object.prototype).sort();

  it.each([
    '{{ $json.__proto__ }}',
    "{{ $json['__proto__'] }}",
    '{{ $json.__proto__.polluted }}',
    '{{ $json.constructor }}',
    '{{ $json.constructor.name }}',
    '{{ $json.constructor.prototype }}',
    '{{ $json.toString }}',
    '{{ $json.hasOwnProperty }}',
    '{{ $json.items.constructor }}',
    '{{ $json.items.map }}',
    "{{ $headers['__proto__'] }}",
    '{{ $headers.constructor }}',
    '{{ $request.constructor.constructor }}',
    '{{ $query.__proto__ }}',
    '{{ $params.valueOf }}',
  ])('%s renders empty (null in JSON) and touches nothing', (template) => {
    const before = protoKeys();
    expect(render(`<${template}>`, 'text')).toBe('<>');
    expect(render(`[${template}]`, 'json')).toBe('[null]');
    expect(render(`"${template}"`, 'json')).toBe('""');
    expect(protoKeys()).toEqual(before);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('reads own data properties that happen to carry such names', () => {
    const s = scope({ $json: JSON.parse('{"constructor":"Ferrari","__proto__":{"x":1}}') });
    expect(render('{{ $json.constructor }}|{{ $json.__proto__.x }}', 'text', s)).toBe('Ferrari|1');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('works with null-prototype scope objects', () => {
    const headers = Object.assign(Object.create(null) as Record<string, string>, { 'x-id': 'n1' });
    expect(render("{{ $headers['X-Id'] }}", 'text', scope({ $headers: headers }))).toBe('n1');
  });
});

describe('compile errors', () => {
  it.each([
    ['a call', '{{ process.exit() }}'],
    ['arithmetic', '{{ $json.a + 1 }}'],
    ['a constructor escape', "{{ constructor.constructor('x')() }}"],
    ['require', "{{ require('fs') }}"],
    ['an empty placeholder', '{{ }}'],
    ['a trailing dot', '{{ $json. }}'],
    ['an unclosed bracket', '{{ $json[ }}'],
    ['an unquoted bracket name', '{{ $json[a] }}'],
    ['an unterminated bracket string', "{{ $json['a }}"],
    ['a numeric dot name', '{{ $json.0 }}'],
    ['a negative index', '{{ $json[-1] }}'],
    ['an index with a leading zero', '{{ $json[01] }}'],
    ['optional chaining', '{{ $json?.a }}'],
    ['a second statement', '{{ $json.a; $json.b }}'],
    ['two paths', '{{ $json.a $json.b }}'],
    ['a template literal', '{{ `x` }}'],
    ['an unsupported escape in a bracket name', "{{ $json['\\n'] }}"],
    ['a ternary', "{{ $json.a ? 'x' : 'y' }}"],
    ['a comparison', '{{ $json.a == 1 }}'],
    ['an assignment', "{{ $json.a = 'x' }}"],
    ['a triple brace', '{{{ $json.a }}}'],
  ])('rejects %s', (_name, template) => {
    compileError(`{"a": ${template}}`);
  });

  it('names the offending expression and its position', () => {
    const err = compileError('{"x": 1, "y": {{ $json.a + 1 }} }');
    expect(err.message).toContain('"$json.a + 1"');
    expect(err.message).toContain('position 14');
    expect(err.position).toBe(14);
    expect(err.expression).toBe('$json.a + 1');
    expect(err.name).toBe('TemplateError');
    expect(err).toBeInstanceOf(Error);
  });

  it('rejects an unclosed "{{" and says where it is', () => {
    const err = compileError('ok {{ $json.a }} then {{ $json.b');
    expect(err.message).toMatch(/unclosed/i);
    expect(err.position).toBe(22);
    expect(err.message).toContain('position 22');
  });

  it('rejects a non-string template', () => {
    expect(() => compileTemplate(undefined as unknown as string)).toThrow(TemplateError);
  });

  it('accepts templates without placeholders, and stray closing braces', () => {
    expect(render('{"ok":true}', 'json')).toBe('{"ok":true}');
    expect(render('a }} b } c {', 'text')).toBe('a }} b } c {');
    expect(render('', 'json')).toBe('');
  });
});

describe('limits', () => {
  it(`accepts a template of ${MAX_TEMPLATE_BYTES} bytes and rejects one byte more`, () => {
    expect(() => compileTemplate('x'.repeat(MAX_TEMPLATE_BYTES))).not.toThrow();
    expect(() => compileTemplate('x'.repeat(MAX_TEMPLATE_BYTES + 1))).toThrow(TemplateError);
  });

  it('counts the template size in UTF-8 bytes', () => {
    expect(() => compileTemplate('é'.repeat(MAX_TEMPLATE_BYTES / 2 + 1))).toThrow(/bytes/);
  });

  it(`accepts ${MAX_PLACEHOLDERS} placeholders and rejects one more`, () => {
    const many = (n: number) => Array.from({ length: n }, () => '{{ $request.id }}').join(',');
    expect(compileTemplate(many(MAX_PLACEHOLDERS)).expressions).toHaveLength(MAX_PLACEHOLDERS);
    expect(() => compileTemplate(many(MAX_PLACEHOLDERS + 1))).toThrow(/placeholders/);
  });

  it('caps the rendered output', () => {
    const half = 'x'.repeat(MAX_OUTPUT_BYTES / 2 + 1);
    const s = scope({ $json: { half, euro: '€'.repeat(400_000) } });
    expect(render('{{ $json.half }}', 'text', s)).toHaveLength(half.length);
    expect(() => render('{{ $json.half }}{{ $json.half }}', 'text', s)).toThrow(TemplateError);
    expect(() => render('"{{ $json.half }}{{ $json.half }}"', 'json', s)).toThrow(/exceeds/);
    // 400 000 characters but 1.2 MB of UTF-8.
    expect(() => render('"{{ $json.euro }}"', 'json', s)).toThrow(TemplateError);
    // The same value as a header value is 400 000 '?' characters: within the cap.
    expect(render('{{ $json.euro }}', 'text', s)).toHaveLength(400_000);
  });
});

describe('caching', () => {
  it('compileTemplateCached returns the same compiled template for the same source', () => {
    const a = compileTemplateCached('{{ $request.id }} cached');
    expect(compileTemplateCached('{{ $request.id }} cached')).toBe(a);
    expect(compileTemplateCached('{{ $request.id }} other')).not.toBe(a);
    expect(a.render(scope(), 'text')).toBe('req-123 cached');
  });

  it('does not cache compile errors', () => {
    const before = templateCache.size;
    expect(() => compileTemplateCached('{{ bad( }}')).toThrow(TemplateError);
    expect(() => compileTemplateCached('{{ bad( }}')).toThrow(TemplateError);
    expect(templateCache.size).toBe(before);
  });

  it(`keeps at most ${TEMPLATE_CACHE_ENTRIES} entries in the shared cache`, () => {
    for (let n = 0; n < TEMPLATE_CACHE_ENTRIES + 50; n++) compileTemplateCached(`{{ $request.id }}#${n}`);
    expect(templateCache.size).toBe(TEMPLATE_CACHE_ENTRIES);
  });

  it('evicts the least recently used template', () => {
    const cache = createTemplateCache(2);
    const a = cache.get('a');
    const b = cache.get('b');
    expect(cache.get('a')).toBe(a); // a is now the most recent
    cache.get('c'); // evicts b
    expect(cache.size).toBe(2);
    expect(cache.get('a')).toBe(a);
    expect(cache.get('b')).not.toBe(b);
    cache.clear();
    expect(cache.size).toBe(0);
    expect(() => createTemplateCache(0)).toThrow(RangeError);
  });
});
