import { logLevel } from 'kafkajs';
import { createKafkaClient, kafkaLogFields, kafkaLogLevel } from '../../services/platform/log/kafka/kafka-client';
import { createLogger } from '../../services/platform/logger/logger';

/** kafkajs logs a healthy cluster's coordination at `error`; what it retries by itself must not page anyone. */
describe('kafkajs log levels', () => {
  const at = (level: logLevel, message: string, error?: string) => kafkaLogLevel({ level, log: { message, error } });

  test('rebalances, coordinator moves and concurrent transactions are debug', () => {
    expect(at(logLevel.ERROR, 'Response Heartbeat(key: 12, version: 3)', 'The group is rebalancing, so a rejoin is needed')).toBe('debug');
    expect(at(logLevel.ERROR, 'The coordinator is not aware of this member, re-joining the group')).toBe('debug');
    expect(at(logLevel.ERROR, 'Response AddPartitionsToTxn(key: 24, version: 1)', 'There is a newer producer with the same transactionalId which fences the current one')).toBe('debug');
    expect(at(logLevel.ERROR, 'Response InitProducerId(key: 22, version: 1)', 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing')).toBe('debug');
    expect(at(logLevel.WARN, 'The group is rebalancing, re-joining')).toBe('debug');
    // A fresh cluster's first start: the join meets a coordinator still loading, and kafkajs restarts the consumer.
    expect(at(logLevel.ERROR, "Crash: KafkaJSProtocolError: The coordinator is loading and hence can't process requests for this group")).toBe('debug');
    expect(at(logLevel.ERROR, 'Restarting the consumer in 200ms')).toBe('debug');
  });

  test("a partition's leader being elected or moved is debug: kafkajs refreshes its metadata and retries", () => {
    // What `topics apply` meets when it asks the leaders of the partitions it has just created.
    expect(at(logLevel.ERROR, 'Response ListOffsets(key: 2, version: 3)', 'This server is not the leader for that topic-partition')).toBe('debug');
    expect(at(logLevel.ERROR, 'Response Metadata(key: 3, version: 6)', 'There is no leader for this topic-partition as we are in the middle of a leadership election')).toBe('debug');
    // Other failed responses stay warnings.
    expect(at(logLevel.ERROR, 'Response ListOffsets(key: 2, version: 3)', 'This server does not host this topic-partition')).toBe('warn');
    expect(at(logLevel.ERROR, 'Response Produce(key: 0, version: 7)', 'Not authorized to access topics: [Topic authorization failed]')).toBe('warn');
  });

  test('anything else kafkajs says is at most a warning; info and debug are not forwarded', () => {
    expect(at(logLevel.ERROR, 'Connection error: connect ECONNREFUSED 127.0.0.1:9092')).toBe('warn');
    expect(at(logLevel.ERROR, 'Crash: KafkaJSNumberOfRetriesExceeded')).toBe('warn');
    expect(at(logLevel.INFO, 'Consumer has joined the group')).toBeNull();
    expect(at(logLevel.ERROR, 'Offset out of range, resetting to default offset')).toBe('error');
    expect(at(logLevel.WARN, 'KafkaJS v2.0.0 switched default partitioner')).toBeNull();
  });
});

test("a failed response's line names Kafka's error, and never carries a message that is not one of Kafka's", () => {
  const fields = (log: Record<string, unknown>) => kafkaLogFields({ namespace: 'Connection', log: { message: 'Response ListOffsets(key: 2, version: 3)', ...log } });
  expect(fields({ error: 'There is no leader for this topic-partition as we are in the middle of a leadership election', broker: '127.0.0.1:9092', correlationId: 7 }))
    .toEqual({ component: 'kafkajs', namespace: 'Connection', broker: '127.0.0.1:9092', kafkaError: 'LEADER_NOT_AVAILABLE' });
  // kafkajs's own messages can hold what failed (a record's validation error): neither the text nor a name.
  expect(fields({ error: 'Invalid message: {"card":"4111 1111 1111 1111"}' })).toEqual({ component: 'kafkajs', namespace: 'Connection' });
  expect(fields({ error: { message: 'not a string' } })).toEqual({ component: 'kafkajs', namespace: 'Connection' });
});

test('the installed kafkajs carries the per-partition retry of patches/kafkajs+2.2.4.patch (docs/kafka.md)', () => {
  // createKafkaClient refuses an unpatched kafkajs; npm install's postinstall (patch-package) applies the patch.
  expect(() => createKafkaClient({ brokers: ['127.0.0.1:9'], clientId: 'patch-check', logger: createLogger({ level: 'error', write: () => undefined }) })).not.toThrow();
});
