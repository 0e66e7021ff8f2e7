/**
 * kafkajs's read_committed filter as patched (patches/kafkajs+2.2.4.patch, "ingress-patch 4"): pure logic over
 * the messages of a fetch and the aborted transactions the broker listed with it. The broker lists them in the
 * order their abort markers were written; a fetch that starts inside several lists them all.
 * test/integration/kafka-log.test.ts shows the same against a real broker.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const filterAbortedMessages = require('kafkajs/src/consumer/filterAbortedMessages') as (args: { messages: Message[]; abortedTransactions: { producerId: string; firstOffset: string }[] }) => Message[];

interface Message { offset: string; key: Buffer | null; value: string; isControlRecord?: boolean; batchContext: { producerId: string; inTransaction: boolean } }

const message = (offset: number, producerId: string, value: string): Message => ({ offset: String(offset), key: Buffer.from('k'), value, batchContext: { producerId, inTransaction: true } });
const abortMarker = (offset: number, producerId: string): Message => ({ offset: String(offset), key: Buffer.from([0, 0, 0, 0]), value: '', isControlRecord: true, batchContext: { producerId, inTransaction: true } });
const values = (out: Message[]) => out.filter((m) => m.value !== '').map((m) => m.value);

test('aborted transactions listed in abort order (a later start first) are all filtered', () => {
  const messages = [message(0, '1', 'committed-a1'), message(1, '2', 'aborted-b1'), message(2, '3', 'aborted-c1'), message(3, '1', 'committed-a2'),
    message(4, '2', 'aborted-b2'), message(5, '3', 'aborted-c2'), abortMarker(6, '3'), abortMarker(7, '2')];
  const out = filterAbortedMessages({ messages, abortedTransactions: [{ producerId: '3', firstOffset: '2' }, { producerId: '2', firstOffset: '1' }] });
  expect(values(out)).toEqual(['committed-a1', 'committed-a2']);
});

test('a fetch that starts inside two aborted transactions filters both', () => {
  const out = filterAbortedMessages({
    messages: [message(3, '7', 'aborted-7'), message(4, '5', 'aborted-5'), message(5, '9', 'committed-9')],
    abortedTransactions: [{ producerId: '5', firstOffset: '1' }, { producerId: '7', firstOffset: '2' }],
  });
  expect(values(out)).toEqual(['committed-9']);
});

test('a producer whose abort marker was read is read again in its next transaction', () => {
  const out = filterAbortedMessages({
    messages: [message(0, '4', 'aborted'), abortMarker(1, '4'), message(2, '4', 'committed')],
    abortedTransactions: [{ producerId: '4', firstOffset: '0' }],
  });
  expect(values(out)).toEqual(['committed']);
});

test('a data record keyed like an abort marker (four zero bytes) does not end its producer\'s aborted transaction', () => {
  const zeroKeyed: Message = { ...message(1, '4', 'aborted-zero-keyed'), key: Buffer.from([0, 0, 0, 0]) };
  const out = filterAbortedMessages({
    messages: [message(0, '4', 'aborted-1'), zeroKeyed, message(2, '4', 'aborted-2'), abortMarker(3, '4'), message(4, '4', 'committed')],
    abortedTransactions: [{ producerId: '4', firstOffset: '0' }],
  });
  expect(values(out)).toEqual(['committed']);
});
