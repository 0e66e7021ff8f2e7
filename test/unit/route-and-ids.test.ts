import { parseHookRoute, targetPath } from '../../services/receiver/route';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Type } from 'avsc';
import { executionId } from '../../services/dispatcher/execution-id';
import { executionInput, executionRecords } from '../../services/dispatcher/dispatcher';
import { defaultAvroCodec, findSchemaDir } from '../../services/platform/avro/codec';
import { fingerprint64, fingerprintBytes } from '../../services/platform/avro/fingerprint';
import type { Decoded } from '../../services/platform/avro/records';
import { secretsEqual } from '../../services/triggers/secret-compare';
import { redactHeaders } from '../../services/platform/logger/redact';

test('hook routes: id, suffix of any depth, repeated query values', () => {
  expect(parseHookRoute('/hook/wf-1')).toEqual({ workflowId: 'wf-1', pathSuffix: null, query: {} });
  expect(parseHookRoute('/hook/wf-1/')).toEqual({ workflowId: 'wf-1', pathSuffix: null, query: {} });
  expect(parseHookRoute('/hook/wf-1/a/b%20c?x=1&x=2&y=')).toEqual({ workflowId: 'wf-1', pathSuffix: 'a/b c', query: { x: ['1', '2'], y: [''] } });
  for (const bad of ['/', '/hook', '/hook/', '/hooks/wf', '/hook/%E0%A4%A']) expect(parseHookRoute(bad)).toBeNull();
  // Names that Object.prototype has are query names like any other.
  const inherited = parseHookRoute('/hook/wf-1?toString=1&__proto__=2&constructor=3&hasOwnProperty=4&toString=5')!.query;
  expect(Object.entries(inherited)).toEqual([['toString', ['1', '5']], ['__proto__', ['2']], ['constructor', ['3']], ['hasOwnProperty', ['4']]]);
  // A suffix segment that is not UTF-8 percent-encoding is forwarded as sent; the others are decoded.
  expect(parseHookRoute('/hook/wf-1/100%/caf%E9/a%20b')?.pathSuffix).toBe('100%/caf%E9/a b');
  // A fragment (which Node's parser passes on) is no part of the id, the suffix or the query; `%23` is a `#` of them.
  expect(parseHookRoute('/hook/wf-1#frag')).toEqual({ workflowId: 'wf-1', pathSuffix: null, query: {} });
  expect(parseHookRoute('/hook/wf-1/a?x=1#frag?y=2')).toEqual({ workflowId: 'wf-1', pathSuffix: 'a', query: { x: ['1'] } });
  expect(parseHookRoute('/hook/wf%231/a%23b?x=%23')).toEqual({ workflowId: 'wf#1', pathSuffix: 'a#b', query: { x: ['#'] } });
  expect(parseHookRoute('/hook/#wf-1')).toBeNull();
  // The absolute form (RFC 9112 §3.2.2) is the same route; its authority is kept nowhere, not even in a log's path.
  expect(parseHookRoute('http://hooks.example.com/hook/wf-1/a?x=1')).toEqual({ workflowId: 'wf-1', pathSuffix: 'a', query: { x: ['1'] } });
  expect(parseHookRoute('HTTPS://u:p@h:8443/hook/wf-1')).toEqual({ workflowId: 'wf-1', pathSuffix: null, query: {} });
  for (const bad of ['http://h', 'http://h?x=/hook/wf-1', 'http://h/hooks/wf', 'ftp://h/hook/wf-1', 'hook/wf-1', '*']) expect(parseHookRoute(bad)).toBeNull();
  expect(targetPath('http://user:secret@h/hook/wf-1/a?token=t#f')).toBe('/hook/wf-1/a');
  // Node's parser passes on an absolute form of any scheme: only http(s) routes, and no authority is logged.
  for (const other of ['ftp://u:secret@h/hook/wf-1', 'FTP://h/hook/wf-1', 'foo://u:secret@h/hook/wf-1', 'ws://u:secret@h/hook/wf-1', 'a+b.c-d://u:secret@h/hook/wf-1']) {
    expect([other, parseHookRoute(other)]).toEqual([other, null]);
  }
  expect(targetPath('ftp://u:secret@h/hook/wf-1?x=1')).toBe('/hook/wf-1');
  expect(targetPath('foo://u:secret@h')).toBe('/');
  expect(targetPath('a+b.c-d://u:secret@h:21?x=1')).toBe('/');
});

test('hook routes: a "." or ".." segment, percent-encoded or not, marks the route to be refused; dots within a segment do not', () => {
  const dotted = ['/hook/./wf', '/hook/../wf', '/hook/..', '/hook/.', '/hook/wf/..', '/hook/wf/.', '/hook/wf/./x', '/hook/wf/a/../b', '/hook/wf/..?x=1',
    '/hook/%2e/wf', '/hook/%2E%2E/wf', '/hook/wf/%2e%2E', '/hook/wf/.%2e/', '/hook/wf/a%2F..%2Fb', '/hook/wf/%2e%2e%2fx', 'http://h/hook/../wf', '/hook/../hook/wf',
    // A segment that does not decode as UTF-8 is no reason to let its dots through.
    '/hook/wf/%2e%2e%2f%zz', '/hook/wf/..%2f%E9x', '/hook/wf/a%2F..%2F%FF',
    // `\` is a `/` to WHATWG URL parsers (and to many servers), raw or percent-encoded.
    '/hook/wf/..\\x', '/hook/wf/%2e%2e%5cx', '/hook/wf\\..', '/hook/wf/x%5C.%5Cy',
    // A path parameter is dropped before the path is resolved by some servers (Tomcat: `/a/..;x/b` is `/b`).
    '/hook/wf/..;x', '/hook/wf/.;', '/hook/..;/wf', '/hook/wf/%2e%2e;jsessionid=1', '/hook/wf/..%3Bx',
    // The suffix is handed on decoded: to WHATWG URL a tab, CR or LF is nothing, `?` and `#` end the path, C0 controls
    // and spaces at the ends are trimmed. Each of these became `..` to a consumer building a URL from it.
    '/hook/wf/..%3Fx', '/hook/wf/..%23x', '/hook/wf/.%09.', '/hook/wf/..%09', '/hook/wf/.%0a.', '/hook/wf/..%00', '/hook/wf/%0D..', '/hook/wf/%20..%20/x',
    '/hook/wf/a/..%3F/b', '/hook/wf/a%3Bb/..%00', '/hook/wf/x%5C..%09', '/hook/wf/.%1F',
    // Decoded to `%2e%2e`, which WHATWG URL reads as `..` in a segment (found by review).
    '/hook/wf/%252e%252e', '/hook/wf/%252e', '/hook/wf/x/%252E./y', '/hook/wf/%252%09e%252e'];
  for (const t of dotted) expect([t, parseHookRoute(t)?.dotSegment]).toEqual([t, true]);
  for (const t of ['/hook/wf', '/hook/wf.1/a.b', '/hook/wf/.../x', '/hook/wf/.x/x.', '/hook/wf/%2e%2e%2e', '/hook/wf?p=..', '/hook/wf#/..', '/hook/wf/a%2F.b',
    '/hook/wf.v2', '/hook/wf//x', '/hook/wf/a;..', '/hook/wf/...;x', '/hook/wf/.x;y', '/hook/wf?..\\x', '/hook/wf/%zz',
    // Decoded, still no dot segment: `%c0%ae` is no UTF-8 (kept as sent), a `;` cuts its own segment only.
    '/hook/wf/%c0%ae%c0%ae', '/hook/wf/%c0%ae', '/hook/wf/a%3B..', '/hook/wf/..x%09', '/hook/wf/.%09x', '/hook/wf/%2E%2E%2E%00', '/hook/wf/a%3Fb', '/hook/wf/a;b']) {
    expect([t, parseHookRoute(t)?.dotSegment]).toEqual([t, undefined]);
  }
});

test('execution ids are deterministic UUIDs per request and batch index', () => {
  const a = executionId('req-1', 0);
  expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(executionId('req-1', 0)).toBe(a);
  expect(executionId('req-1', 1)).not.toBe(a);
  expect(executionId('req-2', 0)).not.toBe(a);
  // Ids already written must come out the same from every version (a replay is recognised by its ids).
  expect(a).toBe('9c6c4ae2-b414-5942-9a1d-53d321ac9ed3');
});

test('an execution id derives from the item\'s sourceIndex; a Decoded written before the field existed keeps the ids of its items\' positions', () => {
  const codec = defaultAvroCodec();
  const queues = { webhook: 'q', as2: 'q', logistics: 'q', warehouse: 'q' };
  const dispatched = (decoded: Decoded) => executionRecords(decoded, { codec, executionQueues: queues, recordKey: 'workflow' }).map((r) => codec.decode('ExecutionRequested', r.value));
  const base = { requestId: 'req-9', workflowId: 'wf', triggerNode: 'Freight', triggerKind: 'logistics' as const, pathSuffix: null, receivedAt: 1, duplicateOf: null };
  // Messages 1 and 2 of a request whose Message 0 the Action filter skipped.
  const now = dispatched({ ...base, items: [{ value: '{}', files: [], sourceIndex: 1 }, { value: '{}', files: [], sourceIndex: 2 }] });
  expect(now.map((e) => e.executionId)).toEqual([executionId('req-9', 1), executionId('req-9', 2)]);
  expect(now.map((e) => [e.batchIndex, e.batchSize])).toEqual([[0, 2], [1, 2]]);

  // The same items as the decoder wrote them before sourceIndex existed: the bytes of the previous schema.
  const previous = JSON.parse(fs.readFileSync(path.join(findSchemaDir(), 'history', 'Decoded.1.avsc'), 'utf8'));
  const oldItems = [{ value: '{}', files: [] }, { value: '{}', files: [] }];
  const old = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprintBytes(fingerprint64(Type.forSchema(previous))), Type.forSchema(previous, { wrapUnions: 'auto' }).toBuffer({ ...base, items: oldItems })]);
  const read = codec.decode('Decoded', old);
  expect(read.items.map((i) => i.sourceIndex)).toEqual([null, null]);
  // …dispatched again (a replay of the decoded topic), they get the ids they were first dispatched with.
  expect(dispatched(read).map((e) => e.executionId)).toEqual([executionId('req-9', 0), executionId('req-9', 1)]);

  // Two items from one source would share an id: the record is refused rather than one execution lost.
  expect(() => dispatched({ ...base, items: [{ value: '{}', files: [], sourceIndex: null }, { value: '{}', files: [], sourceIndex: 0 }] })).toThrow(/same sourceIndex/);
});

test('execution input wraps the item under the node name and adds path only when there is one', () => {
  const decoded = { requestId: 'r', workflowId: 'w', triggerNode: 'My "hook"', triggerKind: 'webhook' as const, receivedAt: 0, items: [], duplicateOf: null };
  expect(JSON.parse(executionInput({ ...decoded, pathSuffix: null }, '{"a":1}'))).toEqual({ 'My "hook"': { a: 1 } });
  expect(JSON.parse(executionInput({ ...decoded, pathSuffix: 'x/y' }, '[1,2]'))).toEqual({ 'My "hook"': [1, 2], path: 'x/y' });
  // A node named `path` keeps its output rather than lose it to the suffix.
  expect(JSON.parse(executionInput({ ...decoded, triggerNode: 'path', pathSuffix: 'eu' }, '{"order":42}'))).toEqual({ path: { order: 42 } });
});

test('secret comparison', () => {
  expect(secretsEqual('abc', 'abc')).toBe(true);
  expect(secretsEqual('abc', 'abd')).toBe(false);
  expect(secretsEqual('abc', 'abcd')).toBe(false);
  expect(secretsEqual('', '')).toBe(true);
});

test('credential-bearing headers are redacted, extra ones on request', () => {
  expect(redactHeaders({ Authorization: 'Basic x', 'X-Tenant-Key': 'k', 'content-type': 'a/b', 'x-my-token': 't' }, ['x-tenant-key']))
    .toEqual({ authorization: '[redacted]', 'x-tenant-key': '[redacted]', 'content-type': 'a/b', 'x-my-token': '[redacted]' });
  const vendors = ['X-Authorization', 'X-Shopify-Hmac-Sha256', 'Ocp-Apim-Subscription-Key', 'X-Goog-Api-Key', 'apikey', 'X-Functions-Key', 'X-Session-Id', 'X-Amz-Security-Token', 'X-Passphrase', 'X-Pwd', 'X-Jwt'];
  const plain = ['content-type', 'user-agent', 'keep-alive', 'x-request-id', 'idempotency-keys-used', 'idempotency-key', 'x-correlation-id', 'accept'];
  const out = redactHeaders(Object.fromEntries([...vendors, ...plain].map((name) => [name, 'v'])));
  expect(vendors.filter((name) => out[name.toLowerCase()] !== '[redacted]')).toEqual([]);
  expect(plain.filter((name) => out[name] !== 'v')).toEqual([]);
});

test('a callback URL header loses its query only where the trigger names it (AS2), quoted or not', () => {
  const headers = { 'Receipt-Delivery-Option': 'https://cb.example/x?ref=7' };
  // A webhook's header of that name is the partner's data (found by review: it was rewritten for every trigger).
  expect(redactHeaders(headers)).toEqual({ 'receipt-delivery-option': 'https://cb.example/x?ref=7' });
  expect(redactHeaders(headers, [], ['receipt-delivery-option'])).toEqual({ 'receipt-delivery-option': 'https://cb.example/x?...' });
  // Quoted, as the delivery takes it (found by review: the token stayed); no URL at all: elided too.
  expect(redactHeaders({ 'receipt-delivery-option': ' "https://cb.example/x?token=S" ' }, [], ['receipt-delivery-option'])).toEqual({ 'receipt-delivery-option': 'https://cb.example/x?...' });
  expect(redactHeaders({ 'receipt-delivery-option': 'my-callback-42' }, [], ['receipt-delivery-option'])).toEqual({ 'receipt-delivery-option': '(not a URL)' });
  expect(redactHeaders({ 'receipt-delivery-option': '"https://a.example/x", "https://b.example/y?t=1"' }, [], ['receipt-delivery-option'])).toEqual({ 'receipt-delivery-option': '(not a URL)' });
  expect(redactHeaders({ 'receipt-delivery-option': ' ' }, [], ['receipt-delivery-option'])).toEqual({ 'receipt-delivery-option': ' ' });
});
