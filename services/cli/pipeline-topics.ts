import type { Config } from '../platform/config/config';
import type { EventLog } from '../platform/log/event-log';
import { pipelineTopics, pipelineTopicSpecs, type TopicSpec } from '../platform/log/topics';

/** The topics this configuration's pipeline uses, as `ingress topics apply` creates them. */
export function topicSpecs(config: Config): TopicSpec[] {
  return pipelineTopicSpecs(pipelineTopics(config.topicPrefix), Object.values(config.executionQueues), config.topicSettings);
}

/**
 * Before the stages start: on Kafka the topics must exist already, created with their documented settings by
 * `ingress topics apply` (a broker's auto-creation would give them its defaults: one replica, no
 * min.insync.replicas). The embedded log has nothing to create.
 */
export async function checkTopics(config: Config, log: EventLog): Promise<void> {
  const missing = await log.missingTopics(topicSpecs(config).map((s) => s.topic));
  if (missing.length > 0) {
    throw new Error(`topic(s) ${missing.join(', ')} do not exist; create them with \`ingress topics apply\` (same environment) before starting`);
  }
}
