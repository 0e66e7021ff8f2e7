import { Readable } from 'node:stream';
import type { Received } from '../../services/platform/avro/records';
import { silentLogger } from '../../services/platform/logger/logger';
import type { ObjectStore } from '../../services/platform/store/object-store';
import { decodeWebhookBody } from '../../services/triggers/webhook/decode';
import { webhookParameters } from '../../services/triggers/webhook/parameters';
import { DEFAULT_WEBHOOK_LIMITS } from '../../services/triggers/webhook/webhook-trigger';

/** The webhook decoder (decode.ts) against a store that only notes what it was given. */
async function decode(contentType: string | null, body: Buffer, options: Record<string, unknown> = {}) {
  const puts: Array<{ path: string; contentType: string | undefined }> = [];
  const store = { put: async (path: string, stream: Readable, put?: { contentType?: string }) => {
    for await (const _ of stream) { /* drained */ }
    puts.push({ path, contentType: put?.contentType });
    return { path, size: 0, contentType: put?.contentType ?? null };
  } } as unknown as ObjectStore;
  const received = { requestId: 'r-1', workflowId: 'wf', receivedAt: Date.parse('2026-11-27T10:00:00Z'), contentType, headers: {} } as unknown as Received;
  const services = { store, logger: silentLogger, openBody: async () => Readable.from([body]), readBody: async () => body };
  const decoded = await decodeWebhookBody(received, webhookParameters({ name: 'Hook', type: 'webhook', parameters: { options } }), DEFAULT_WEBHOOK_LIMITS, services);
  return { value: JSON.parse(decoded.value) as unknown, puts };
}

test('a body kept as a file is stored with a content type of two tokens, as AS2 parts are, or none when none was sent', async () => {
  // The type as sent (RFC 9110 lets a parser take `a b` or `json`); the workflow output and the store must agree.
  const typeOf = async (sent: string | null, options: Record<string, unknown> = { rawBody: true }) => (await decode(sent, Buffer.from('x'), options)).puts[0].contentType;
  expect(await typeOf('Application/PDF; name="a.pdf"')).toBe('application/pdf');
  expect(await typeOf('application/vnd.acme+json')).toBe('application/vnd.acme+json');
  expect(await typeOf('a b')).toBe('application/octet-stream');
  expect(await typeOf('json')).toBe('application/octet-stream');
  expect(await typeOf('text/plain/extra', { binaryData: true })).toBe('application/octet-stream');
  expect(await typeOf(null)).toBeUndefined();
});

test('a multipart file part is stored with its type cleaned as a body kept whole is', async () => {
  const part = (type: string | null) => '--B\r\nContent-Disposition: form-data; name="f"; filename="a.txt"\r\n'
    + (type === null ? '' : `Content-Type: ${type}\r\n`) + '\r\nhello\r\n';
  const body = Buffer.from([part('Text/CSV; charset=utf-8'), part('a b'), part('text/plain/extra'), part(null), part('application/vnd.acme+json')].join('') + '--B--\r\n', 'latin1');
  const { puts } = await decode('multipart/form-data; boundary=B', body);
  expect(puts.map((p) => p.contentType)).toEqual(['text/csv', 'text/plain', 'text/plain', 'text/plain', 'application/vnd.acme+json']);
});

test('a form in UTF-16 is a payload-parse-error (dead letter), as the receiver answers it, not split on its bytes', async () => {
  // Reachable by a record accepted before the receiver refused such forms, or by a replay of one.
  for (const charset of ['utf-16le', 'UTF-16', 'unicode']) {
    await expect(decode(`application/x-www-form-urlencoded; charset=${charset}`, Buffer.from('a=1&b=2', 'utf16le')))
      .rejects.toMatchObject({ name: 'IngressError', code: 'payload-parse-error', message: expect.stringMatching(/^A URL-encoded form cannot be read in utf-16le, /) });
  }
  // Charsets that write ASCII as ASCII bytes are read as before.
  expect((await decode('application/x-www-form-urlencoded; charset=shift_jis', Buffer.from('a=%82%A0'))).value).toEqual({ a: 'あ' });
});

test('the decoder holds a form to its limits\' maxFormFields: more is a payload-too-large dead letter', async () => {
  const form = Buffer.from(Array.from({ length: DEFAULT_WEBHOOK_LIMITS.maxFormFields + 1 }, (_, i) => `f${i}=${i}`).join('&'));
  await expect(decode('application/x-www-form-urlencoded', form)).rejects.toMatchObject({ code: 'payload-too-large', message: `The URL-encoded form has more than ${DEFAULT_WEBHOOK_LIMITS.maxFormFields} fields, the most this service reads from one form` });
  expect(Object.keys((await decode('application/x-www-form-urlencoded', form.subarray(0, form.lastIndexOf('&')))).value as object)).toHaveLength(DEFAULT_WEBHOOK_LIMITS.maxFormFields);
});
