import { createWebhookTrigger, DEFAULT_WEBHOOK_LIMITS } from '../../services/triggers/webhook/webhook-trigger';
import { decodeInMemory } from '../../services/triggers/webhook/decode';
import type { InboundRequest, InspectOutcome } from '../../services/triggers/trigger';

/** What the receiver answers for a body before anything is accepted (docs/webhook.md, "Bodies"). */
const trigger = createWebhookTrigger(DEFAULT_WEBHOOK_LIMITS);
const services = { credential: async () => null, store: null as never, logger: null as never };

async function inspect(contentType: string, bytes: Buffer, options: Record<string, unknown> = {}): Promise<InspectOutcome> {
  const request: InboundRequest = { requestId: 'r', workflowId: 'wf', pathSuffix: null, query: {}, remoteAddress: null, receivedAt: 0, headers: { 'content-type': contentType } };
  const body = { size: bytes.length, inline: bytes, sha256: () => '', readStaged: null };
  return trigger.inspect(request, { name: 'Hook', type: 'webhook', parameters: { options } }, body, services);
}
const answerOf = (outcome: InspectOutcome) => (outcome.ok ? 'accepted' : { status: outcome.answer.status, body: JSON.parse(outcome.answer.body.toString()) });

test('a URL-encoded form in a charset whose characters are not single ASCII bytes (UTF-16) is 400, not accepted garbled', async () => {
  // Split on the byte `&` before decoding, `a=1&b=2` in UTF-16LE came out as {"a\u0000":"\u00001\u0000", …}.
  for (const [charset, canonical] of [['utf-16le', 'utf-16le'], ['UTF-16', 'utf-16le'], ['unicodeFFFE', 'utf-16be'], ['"utf-16be"', 'utf-16be']]) {
    const outcome = await inspect(`application/x-www-form-urlencoded; charset=${charset}`, Buffer.from('a=1&b=2', 'utf16le'));
    expect({ charset, answer: answerOf(outcome) }).toEqual({ charset, answer: { status: 400, body: {
      error: 'payload-parse-error',
      message: `A URL-encoded form cannot be read in ${canonical}, whose characters are not single ASCII bytes: send it in UTF-8 (the default), percent-encoding what is not ASCII`,
    } } });
  }
  // Charsets that keep ASCII as it is, multi-byte ones included, are read as before.
  for (const charset of ['', '; charset=utf-8', '; charset=iso-8859-1', '; charset=windows-1252', '; charset=shift_jis', '; charset=gb18030', '; charset=iso-2022-jp']) {
    expect({ charset, answer: answerOf(await inspect(`application/x-www-form-urlencoded${charset}`, Buffer.from('a=1&b=%E9'))) }).toEqual({ charset, answer: 'accepted' });
  }
  // Text, XML and JSON are decoded whole, so UTF-16 is fine there; Raw Body reads nothing.
  expect(answerOf(await inspect('text/plain; charset=utf-16le', Buffer.from('a=1&b=2', 'utf16le')))).toBe('accepted');
  expect(answerOf(await inspect('application/json; charset=utf-16le', Buffer.from('{"a":1}', 'utf16le')))).toBe('accepted');
  expect(answerOf(await inspect('application/x-www-form-urlencoded; charset=utf-16le', Buffer.from('a=1', 'utf16le'), { rawBody: true }))).toBe('accepted');
});

test('a JSON idempotency key and $json templates read an id past 2^53 as written, as the decoder does, not rounded', async () => {
  // Rounded, 18446744073709551617 and 18446744073709551616 were one key: the second order was dropped as a repeat.
  const node = { name: 'Hook', type: 'webhook', parameters: { options: { idempotencyKey: { json: 'order.id' }, responseData: '{"id":{{ $json.order.id }},"text":"{{ $json.order.id }}"}' } } };
  const keyOf = async (id: string) => {
    const bytes = Buffer.from(`{"order":{"id":${id}}}`);
    const request: InboundRequest = { requestId: 'r', workflowId: 'wf', pathSuffix: null, query: {}, remoteAddress: null, receivedAt: 0, headers: { 'content-type': 'application/json' } };
    const outcome = await trigger.inspect(request, node, { size: bytes.length, inline: bytes, sha256: () => '', readStaged: null }, services);
    if (!outcome.ok) throw new Error('refused');
    const answer = await trigger.accepted(request, node, {} as never, outcome.inspection, { ...services, logger: { warn: () => undefined } } as never);
    return { key: trigger.idempotency!(node)!.keyOf(request, {} as never, outcome.inspection), answer: answer.body.toString() };
  };
  expect(await keyOf('18446744073709551617')).toEqual({ key: '18446744073709551617', answer: '{"id":18446744073709551617,"text":"18446744073709551617"}' });
  expect(await keyOf('18446744073709551616')).toEqual({ key: '18446744073709551616', answer: '{"id":18446744073709551616,"text":"18446744073709551616"}' });
  expect(await keyOf('42')).toEqual({ key: '42', answer: '{"id":42,"text":"42"}' });
});

test('one leading UTF-8 byte order mark before JSON is dropped, by the receiver\'s check and the decoder alike', async () => {
  const bom = (text: string) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]);
  // Checked on the bytes (no template), and parsed for `$json` (a template).
  for (const options of [{}, { responseData: '{{ $json.a }}' }]) {
    expect(answerOf(await inspect('application/json', bom('{"a":1}'), options))).toBe('accepted');
    expect(answerOf(await inspect('application/json', bom(''), options))).toBe('accepted');
    for (const [type, body] of [['application/json', bom('\ufeff{"a":1}')], ['application/json; charset=iso-8859-1', bom('{"a":1}')]] as const) {
      expect({ type, options, answer: answerOf(await inspect(type, body, options)) }).toEqual({ type, options, answer: { status: 400, body: { error: 'payload-parse-error', message: 'The request body is not valid JSON' } } });
    }
  }
  expect(decodeInMemory(bom('{"a":1}'), 'json', undefined)).toEqual({ a: 1 });
  expect(decodeInMemory(bom('{"a":1}'), 'json', 'UTF-8')).toEqual({ a: 1 });
  expect(decodeInMemory(bom(''), 'json', undefined)).toEqual({});
  expect(() => decodeInMemory(bom('\ufeff{}'), 'json', undefined)).toThrow('the JSON body could not be read');
  // Text keeps it: it is the body's text, as sent.
  expect(decodeInMemory(bom('a'), 'text', undefined)).toEqual({ text: '\ufeffa' });
});
