import type { WorkflowNode } from '../../services/platform/registry/documents';
import { createWebhookTrigger } from '../../services/triggers/webhook/webhook-trigger';

/** `workflows put` refuses webhook options that would be ignored as written (found by fuzzing: they were stored and did nothing). */
const trigger = createWebhookTrigger();
const problems = (parameters: Record<string, unknown>) => trigger.validateNode!({ name: 'Hook', type: 'webhook', parameters } as WorkflowNode);

test('options of the wrong kind are refused, naming what each takes', () => {
  expect(problems({ options: { noResponseBody: 'yes', ignoreBots: 1, rawBody: 'true', binaryPropertyName: 42, responseData: { a: 1 } } })).toEqual([
    'node "Hook".parameters.options.ignoreBots must be true or false',
    'node "Hook".parameters.options.rawBody must be true or false',
    'node "Hook".parameters.options.noResponseBody must be true or false',
    'node "Hook".parameters.options.responseData must be a string',
    'node "Hook".parameters.options.binaryPropertyName must be a string',
  ]);
  expect(problems({ options: { responseHeaders: { 'X-A': '1' } } })).toEqual(['node "Hook".parameters.options.responseHeaders must be a list of {"name", "value"} strings']);
  expect(problems({ options: { responseHeaders: [{ header: 'X-A' }] } })).toEqual(['node "Hook".parameters.options.responseHeaders must be a list of {"name", "value"} strings']);
  expect(problems({ options: 'rawBody' })).toEqual(['node "Hook".parameters.options must be an object']);
});

test('an option misspelt in its case, or written one level too high, is refused with where it belongs', () => {
  expect(problems({ options: { rawbody: true } })).toEqual(['node "Hook".parameters.options.rawbody is not an option: did you mean rawBody?']);
  expect(problems({ rawBody: true, responseData: '{}' })).toEqual([
    'node "Hook".parameters.rawBody is an option: put it in parameters.options, where it is read',
    'node "Hook".parameters.responseData is an option: put it in parameters.options, where it is read',
  ]);
});

test('what works is accepted: the options in place, the older places some are read from, and keys this service does not know', () => {
  expect(problems({ options: { rawBody: true, noResponseBody: false, responseData: '{"ok":true}', responseHeaders: [{ name: 'X-A', value: '1' }] } })).toEqual([]);
  expect(problems({ binaryData: true, binaryPropertyName: 'file', rateLimit: { perSecond: 1, burst: 1 } })).toEqual([]);
  expect(problems({ httpMethod: 'POST', path: 'orders', options: { allowedOrigins: '*' } })).toEqual([]);
});

test('a response header value written with characters beyond Latin-1 is refused, naming the character; one a placeholder brings is not', () => {
  expect(problems({ options: { responseHeaders: [{ name: 'X-Greeting', value: 'Grüße {{ $json.name }} 👋' }] } })).toEqual([
    'node "Hook".parameters.options.responseHeaders[0].value holds "👋" (U+1F44B): a header value carries Latin-1 characters only, and it would be sent as "?"; percent-encode it, or put the text in Response Data',
  ]);
  // Latin-1 is fine, and so is a path to a key beyond it: the value it brings becomes '?' at render (webhook.md).
  expect(problems({ options: { responseHeaders: [{ name: 'X-Greeting', value: "Grüße {{ $json['名前'] }}" }] } })).toEqual([]);
});
