import { parseArgs, UsageError } from '../../services/cli/args';
import { tailCommand } from '../../services/cli/commands/tail';
import type { CommandContext } from '../../services/cli/context';
import { loadConfig } from '../../services/platform/config/config';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { EventLog, LogRecord } from '../../services/platform/log/event-log';

/** `ingress tail` names a topic the pipeline does not have, before it opens the log (where it would wait for nothing). */
test('tail refuses a topic that is not one of the pipeline\'s, naming it and those it reads', async () => {
  const ctx = { config: loadConfig({ INGRESS_TOPIC_PREFIX: 'dev.' }), openLog: () => { throw new Error('the log is not opened for an unknown topic'); } } as unknown as CommandContext;
  for (const topic of ['nope.topic', '../../etc', 'executions.requested.v1']) {
    const refused = await tailCommand(parseArgs([topic, '--timeout', '1'], ['timeout']), ctx).then(() => null, (error: Error) => error);
    expect(refused).toBeInstanceOf(UsageError);
    expect(refused!.message).toMatch(new RegExp(`^no pipeline topic ${JSON.stringify(topic).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}; tail reads dev\\.ingress\\.received\\.v1, .*dev\\.executions\\.requested\\.v1`));
  }
});

test('number flags are whole decimal numbers within their bounds, and switches take no value, before the log is opened', async () => {
  const ctx = { config: loadConfig({}), openLog: () => { throw new Error('the log is not opened for a bad flag'); } } as unknown as CommandContext;
  const refusal = (argv: string[]) => tailCommand(parseArgs(['ingress.received.v1', ...argv], ['timeout', 'max']), ctx).then(() => null, (error: Error) => error.message);
  // 3000000 s is past what a timer holds: it fired at once and the command ended without a record.
  expect(await refusal(['--timeout', '3000000'])).toBe('--timeout takes a whole number from 0 to 2147483');
  for (const max of ['0x10', '2.5', '1e3', '0', '']) expect(await refusal(['--max', max])).toBe('--max takes a whole number from 1 to 1000000000');
  expect(await refusal(['--from-beginning=false'])).toBe('--from-beginning takes no value');
});

test('tail prints a decoded item and an execution\'s input with every digit of a number a double would change', async () => {
  const codec = defaultAvroCodec();
  const value = '{"body":{"orderId":9007199254740993,"total":1.5,"big":123456789012345678901234567890}}';
  const at = (topic: string, offset: number, bytes: Buffer): LogRecord => ({ topic, partition: 0, offset: String(offset), key: 'wf', value: bytes, headers: {}, timestamp: 0 });
  const records = [
    at('ingress.decoded.v1', 0, codec.encode('Decoded', {
      requestId: 'req_1', workflowId: 'wf', triggerNode: 'Webhook', triggerKind: 'webhook', pathSuffix: null, receivedAt: 0, duplicateOf: null,
      items: [{ value, files: [], sourceIndex: 0 }],
    })),
    at('ingress.decoded.v1', 1, codec.encode('ExecutionRequested', {
      executionId: 'exe_1', requestId: 'req_1', workflowId: 'wf', triggerNode: 'Webhook', triggerKind: 'webhook',
      input: `{"Webhook":[{"json":${value},"binary":{}}]}`, batchIndex: 0, batchSize: 1, receivedAt: 0, requestedAt: 0, replayOf: null,
    })),
  ];
  const log = { read: async function* () { yield* records; }, close: async () => undefined } as unknown as EventLog;
  const lines: string[] = [];
  const ctx = { config: loadConfig({}), openLog: async () => log, out: (line: string) => lines.push(line) } as unknown as CommandContext;
  expect(await tailCommand(parseArgs(['ingress.decoded.v1', '--from-beginning', '--max', '2'], ['max']), ctx)).toBe(0);
  expect(lines).toHaveLength(2);
  expect(lines[0]).toContain('"items":[{"value":{"body":{"orderId":9007199254740993,"total":1.5,"big":123456789012345678901234567890}}');
  expect(lines[1]).toContain('"input":{"Webhook":[{"json":{"body":{"orderId":9007199254740993,"total":1.5,"big":123456789012345678901234567890}}');
});
