import { allowOnly, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';
import { topicSpecs } from '../pipeline-topics';

export const TOPICS_USAGE = 'ingress topics apply | list  (apply: create or update the pipeline topics on Kafka; list: what this configuration asks for, before apply caps the replication to the number of brokers)';

/**
 * `topics apply` creates the pipeline's topics with the settings docs/records-and-topics.md "Topics" documents and updates those
 * that exist; one JSON line per topic on stdout, warnings on stderr. `topics list` prints what the configuration
 * asks for, without touching the cluster: so not capped to its broker count, as apply's lines are. The
 * embedded log needs neither.
 */
export async function topicsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, []);
  const [verb, ...extra] = args.positionals;
  if ((verb !== 'apply' && verb !== 'list') || extra.length > 0) throw new UsageError(`usage: ${TOPICS_USAGE}`);
  const specs = topicSpecs(ctx.config);
  if (verb === 'list') {
    for (const spec of specs) ctx.out(JSON.stringify(spec));
    return 0;
  }
  if (!ctx.config.kafka) {
    ctx.err('the embedded log (KAFKA_BROKERS not set) has no topics to create: each exists once written');
    return 0;
  }
  const { openKafkaLog } = await import('../../platform/log/kafka/kafka-log');
  const log = await openKafkaLog({ brokers: ctx.config.kafka.brokers, clientId: ctx.config.kafka.clientId, logger: ctx.logger });
  try {
    for (const result of await log.applyTopics(specs, { warn: (m) => ctx.err(`warning: ${m}`) })) ctx.out(JSON.stringify(result));
    return 0;
  } finally {
    await log.close();
  }
}
