import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Decoded, Received } from '../../services/platform/avro/records';
import type { LogRecord } from '../../services/platform/log/event-log';
import { pipelineTopics } from '../../services/platform/log/topics';
import { replayHeaders } from '../../services/platform/log/replay-marking';
import { entriesOf, journalInputs } from '../../services/journal/journal-stage';
import { dispositionOf, JOURNAL_SOURCES } from '../../services/journal/sources';
import { journalView, traceOf } from '../../services/platform/registry/journal';
import { trace } from '@opentelemetry/api';
import { contextFromHeaders } from '../../services/platform/telemetry/trace-context';

/** The record → entry table, on records made with the real codec. */
const codec = defaultAvroCodec();
const topics = pipelineTopics('p.');
const context = { codec, topics, queues: [topics.executions, 'p.executions.requested.as2.v1'] };
const sourceOf = (topic: string) => journalInputs(topics, context.queues).find((i) => i.topic === topic)!.source;
const record = (topic: string, value: Buffer, headers: Record<string, string> = {}, offset = '7'): LogRecord => ({ topic, partition: 2, offset, key: 'wf', value, headers, timestamp: 1_800_000_000_000 });
const received: Received = {
  requestId: 'req-1', workflowId: 'wf', triggerNode: 'In', triggerKind: 'as2', pathSuffix: null, query: {}, headers: {}, contentType: 'application/pkcs7-mime',
  body: { kind: 'inline', data: Buffer.from('x') }, receivedAt: 1_700_000_000_000, principal: 'as2:ACME', remoteAddress: '192.0.2.1',
  as2: { messageId: '<m-1@acme>', from: 'ACME', to: 'US', subject: null, contentType: null, mdn: Buffer.from('Content-Type: message/disposition-notification\r\n\r\nReporting-UA: ingress\r\nDisposition: automatic-action/MDN-sent-automatically; processed\r\n'), asyncMdn: null, receiverKey: null },
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', idempotencyKey: null, duplicateOf: null,
};

test('every topic is read once, each in a group of its own', () => {
  const inputs = journalInputs(topics, context.queues);
  expect(inputs.map((i) => i.topic).sort()).toEqual([topics.deadLetter, topics.decoded, topics.executions, topics.received, topics.refused, topics.mdnOutcomes, 'p.executions.requested.as2.v1'].sort());
  expect(new Set(inputs.map((i) => i.group)).size).toBe(inputs.length);
  expect(inputs.every((i) => i.group.startsWith('p.ingress-journal.'))).toBe(true);
  expect(JOURNAL_SOURCES.map((s) => s.name)).toEqual(['received', 'refused', 'decoded', 'executions', 'dead-letters', 'mdn-outcomes']);
});

test('an AS2 received record: received and its disposition, ids from the position, the trace from the record', () => {
  const entries = entriesOf(record(topics.received, codec.encode('Received', received)), sourceOf(topics.received), context);
  expect(entries.map((e) => [e.id, e.kind, e.at])).toEqual([['p.ingress.received.v1.2.7.0', 'received', received.receivedAt], ['p.ingress.received.v1.2.7.1', 'as2-disposition', received.receivedAt]]);
  expect(entries.every((e) => e.traceId === '0af7651916cd43dd8448eb211c80319c' && e.source === 'p.ingress.received.v1/2/7' && e.replayOf === null)).toBe(true);
  expect(entries[0].keys).toEqual(['messageId:m-1@acme']);
  expect(entries[1].detail).toEqual({ delivery: 'synchronous', messageId: '<m-1@acme>', disposition: 'automatic-action/MDN-sent-automatically; processed' });
  // The same record again makes the same entries: what makes a redelivery harmless.
  expect(entriesOf(record(topics.received, codec.encode('Received', received)), sourceOf(topics.received), context)).toEqual(entries);
});

test('an unsampled trace (trace flags 00): the entries keep its id, say traceSampled false, and get no trace link', () => {
  const unsampled = { ...received, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' };
  const entries = entriesOf(record(topics.received, codec.encode('Received', unsampled)), sourceOf(topics.received), context);
  expect(entries.map((e) => [e.traceId, e.traceSampled])).toEqual(entries.map(() => ['0af7651916cd43dd8448eb211c80319c', false]));
  const traceUrlTemplate = 'http://jaeger/trace/{traceId}';
  expect(entries.map((e) => journalView(e, { traceUrlTemplate }).traceUrl)).toEqual(entries.map(() => undefined));
  // A sampled one (flags 01) links, and says nothing more.
  const [sampled] = entriesOf(record(topics.received, codec.encode('Received', received)), sourceOf(topics.received), context);
  expect(sampled).not.toHaveProperty('traceSampled');
  expect(journalView(sampled, { traceUrlTemplate }).traceUrl).toBe('http://jaeger/trace/0af7651916cd43dd8448eb211c80319c');
});

test('a replayed copy on its own topic is a "replayed" entry; a stage output of a replay carries replayOf', () => {
  const original = record(topics.received, codec.encode('Received', received));
  const copy = record(topics.received, original.value, replayHeaders(original), '99');
  const [replayed] = entriesOf(copy, sourceOf(topics.received), context);
  expect(replayed).toMatchObject({ kind: 'replayed', at: copy.timestamp, replayOf: 'p.ingress.received.v1/2/7', detail: { stage: 'decoder', of: 'p.ingress.received.v1/2/7' } });
  const decoded: Decoded = { requestId: 'req-1', workflowId: 'wf', triggerNode: 'In', triggerKind: 'logistics', pathSuffix: null, receivedAt: 1, duplicateOf: null, items: [
    { value: JSON.stringify({ event: 'event-update', trackingId: 'T-1' }), files: [], sourceIndex: 0 },
    { value: JSON.stringify({ event: 'event-update', trackingId: 'T-1' }), files: [], sourceIndex: 1 },
    { value: JSON.stringify({ event: 'event-update', trackingId: null }), files: [], sourceIndex: 2 },
  ] };
  const [out] = entriesOf(record(topics.decoded, codec.encode('Decoded', decoded), replayHeaders(original)), sourceOf(topics.decoded), context);
  expect(out).toMatchObject({ kind: 'decoded', replayOf: 'p.ingress.received.v1/2/7', keys: ['trackingId:T-1'], detail: { items: 3 } });
});

test('a dead letter of a record that is none of ours belongs to request "unknown"; an unreadable record throws', () => {
  const letter = codec.encode('DeadLetter', { stage: 'decoder', errorCode: 'not-single-object', message: 'no', attempts: 1, failedAt: 5, workflowId: 'wf', source: { topic: topics.received, partition: 0, offset: '3', key: null, value: Buffer.from('poison'), headers: {} } });
  const [entry] = entriesOf(record(topics.deadLetter, letter), sourceOf(topics.deadLetter), context);
  expect(entry).toMatchObject({ requestId: 'unknown', kind: 'dead-lettered', at: 5, detail: { stage: 'decoder', code: 'not-single-object', source: 'p.ingress.received.v1/0/3' } });
  expect(() => entriesOf(record(topics.decoded, Buffer.from('poison')), sourceOf(topics.decoded), context)).toThrow();
});

test('an asynchronous MDN: the disposition entry says so, and each delivery attempt is an entry found by Message-Id', () => {
  const asyncReceived: Received = { ...received, as2: { ...received.as2!, asyncMdn: { url: 'https://partner.example/mdn?token=secret', allowedBy: 'https://partner.example/mdn' } } };
  const [, disposition] = entriesOf(record(topics.received, codec.encode('Received', asyncReceived)), sourceOf(topics.received), context);
  expect(disposition.detail).toEqual({ delivery: 'asynchronous', url: 'https://partner.example/mdn?…', messageId: '<m-1@acme>', disposition: 'automatic-action/MDN-sent-automatically; processed' });
  const outcome = (o: 'delivered' | 'retrying' | 'given_up' | 'dead_lettered', attempts: number) => codec.encode('MdnOutcome', {
    requestId: 'req-1', workflowId: 'wf', messageId: '<m-1@acme>', mdnMessageId: '<mdn-1@us>', url: 'https://partner.example/mdn?token=secret', outcome: o, attempts, at: 1_700_000_100_000 + attempts,
    status: o === 'delivered' ? 200 : 503, reason: o === 'delivered' ? null : 'HTTP 503', nextAttemptAt: o === 'retrying' ? 1_700_000_200_000 : null,
  });
  const [retrying] = entriesOf(record(topics.mdnOutcomes, outcome('retrying', 1)), sourceOf(topics.mdnOutcomes), context);
  expect(retrying).toMatchObject({ requestId: 'req-1', kind: 'mdn-retrying', at: 1_700_000_100_001, keys: ['messageId:m-1@acme'], detail: { url: 'https://partner.example/mdn?…', attempts: 1, status: 503, reason: 'HTTP 503', nextAttemptAt: 1_700_000_200_000 } });
  expect(entriesOf(record(topics.mdnOutcomes, outcome('delivered', 2), {}, '8'), sourceOf(topics.mdnOutcomes), context)[0]).toMatchObject({ kind: 'mdn-delivered', detail: { status: 200, reason: null } });
  expect(entriesOf(record(topics.mdnOutcomes, outcome('given_up', 9), {}, '9'), sourceOf(topics.mdnOutcomes), context)[0]).toMatchObject({ kind: 'mdn-given-up' });
  // A delivery the mdn stage's crash guard dead-lettered (stage-crashed).
  expect(entriesOf(record(topics.mdnOutcomes, outcome('dead_lettered', 1), {}, '10'), sourceOf(topics.mdnOutcomes), context)[0]).toMatchObject({ kind: 'mdn-dead-lettered', keys: ['messageId:m-1@acme'] });
});

test('an MDN\'s disposition is read from its text, signed or not, or null', () => {
  expect(dispositionOf(Buffer.from('a: b\r\nDisposition:   automatic-action/MDN-sent-automatically; processed/error: decryption-failed  \r\n'))).toBe('automatic-action/MDN-sent-automatically; processed/error: decryption-failed');
  expect(dispositionOf(Buffer.from('no such line'))).toBeNull();
});

test("an entry's trace id is the one the W3C propagator takes from the record's traceparent, and none where it takes none", () => {
  const id = '0af7651916cd43dd8448eb211c80319c';
  const span = 'b7ad6b7169203331';
  const cases = [
    `00-${id}-${span}-01`, `00-${id}-${span}-00`, `01-${id}-${span}-01-later-fields`, ` 00-${id}-${span}-01 `,
    // What the propagator refuses: version ff, zero ids, more fields after a version 00, a flags field of three digits.
    `ff-${id}-${span}-01`, `00-${id}-${'0'.repeat(16)}-01`, `00-${'0'.repeat(32)}-${span}-01`, `00-${id}-${span}-01-extra`, `00-${id}-${span}-010`,
    `00-${id.toUpperCase()}-${span}-01`, `00-${id}-${span}`, '',
  ];
  const propagated = (traceparent: string) => {
    const parent = trace.getSpanContext(contextFromHeaders({ traceparent }));
    return parent ? { traceId: parent.traceId, sampled: (parent.traceFlags & 1) === 1 } : null;
  };
  expect(cases.map((c) => [c, traceOf(c)])).toEqual(cases.map((c) => [c, propagated(c)]));
  expect(cases.filter((c) => traceOf(c) !== null)).toHaveLength(4);
});
