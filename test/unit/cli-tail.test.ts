import { parseArgs, UsageError } from '../../services/cli/args';
import { tailCommand } from '../../services/cli/commands/tail';
import type { CommandContext } from '../../services/cli/context';
import { loadConfig } from '../../services/platform/config/config';

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
