import { firstLine, sanitizedCause } from '../../services/platform/logger/error-text';

test('an SDK error becomes a cause with its name, first line and named fields, redacted, and nothing else', () => {
  const sdkError = Object.assign(new Error(`blob not found sig=SECRET\n${'request dump '.repeat(50)}`), {
    name: 'RestError', statusCode: 404, code: 'BlobNotFound sig=SECRET', request: { url: 'https://acct/c/b?sig=SECRET', headers: { authorization: 'SharedKey SECRET' } },
  });
  const cause = sanitizedCause(sdkError, (text) => text.replaceAll('SECRET', '[redacted]'), ['statusCode', 'code', 'missing']) as Error & Record<string, unknown>;
  expect(cause.name).toBe('RestError');
  expect(cause.message).toBe('blob not found sig=[redacted]');
  expect(cause.statusCode).toBe(404);
  expect(cause.code).toBe('BlobNotFound sig=[redacted]');
  expect('missing' in cause).toBe(false);
  expect(JSON.stringify({ ...cause, stack: cause.stack })).not.toContain('SECRET');
  expect(cause.request).toBeUndefined();
});

test('the first line is at most 300 characters, for errors and anything thrown', () => {
  expect(firstLine(new Error(`${'x'.repeat(400)}\nmore`))).toHaveLength(300);
  expect(firstLine('plain\ntext')).toBe('plain');
});
