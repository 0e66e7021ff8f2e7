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
