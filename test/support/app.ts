import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openBackends, type Backends } from '../../services/cli/backends';
import { startServices, SERVICES, type ServiceName, type StartOptions } from '../../services/cli/start';
import { loadConfig, type Config } from '../../services/platform/config/config';
import { createLogger, type Logger } from '../../services/platform/logger/logger';
import { pipelineTopics, type PipelineTopics } from '../../services/platform/log/topics';
import { requireTestEnv, TEST_ENV } from './servers';
import type { EventLog } from '../../services/platform/log/event-log';
import type { KafkaEventLog } from '../../services/platform/log/kafka/kafka-log';
import { topicSpecs } from '../../services/cli/pipeline-topics';

/** What `ingress topics apply` does, before a service starts on Kafka (it refuses to create topics itself). */
export async function applyTopics(config: Config, log: EventLog): Promise<void> {
  if (log.kind === 'kafka') await (log as KafkaEventLog).applyTopics(topicSpecs(config), { warn: () => undefined });
}

/**
 * The whole service in this process, on the embedded backends (a temp DATA_DIR) or on the real
 * servers that globalSetup started (Kafka, Azurite, cosmosdb-server), namespaced per app so test
 * files can share the servers.
 */
export type BackendChoice = 'embedded' | 'real';

export interface TestApp {
  baseUrl: string;
  /** The port the receiver listens on (PORT=0: the OS picked it); null without a receiver. */
  port: number | null;
  config: Config;
  topics: PipelineTopics;
  backends: Backends;
  /** Every log line the app wrote, parsed. */
  logs: Record<string, unknown>[];
  /** Stop the services as a shutdown does (the receiver closed within `receiverGraceMs`); the backends stay open to be read. */
  stopServices(receiverGraceMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export function backendEnv(choice: BackendChoice, extra: Record<string, string> = {}): { env: Record<string, string>; cleanup(): void } {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ingress-app-'));
  const id = randomUUID().replace(/-/g, '').slice(0, 10);
  const env: Record<string, string> = { PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', INGRESS_ENCRYPTION_KEY: 'test-encryption-key-0123456789' };
  if (choice === 'real') {
    Object.assign(env, {
      KAFKA_BROKERS: requireTestEnv(TEST_ENV.kafkaBrokers),
      INGRESS_TOPIC_PREFIX: `t${id}.`,
      // One broker: what `ingress topics apply` creates for each app's topics.
      KAFKA_TOPIC_PARTITIONS: '3',
      KAFKA_REPLICATION_FACTOR: '1',
      KAFKA_MIN_INSYNC_REPLICAS: '1',
      AZURE_STORAGE_CONNECTION_STRING: requireTestEnv(TEST_ENV.azureStorageConnectionString),
      BLOB_CONTAINER: `t${id}`,
      COSMOS_ENDPOINT: requireTestEnv(TEST_ENV.cosmosEndpoint),
      COSMOS_KEY: requireTestEnv(TEST_ENV.cosmosKey),
      COSMOS_DATABASE: `t${id}`,
    });
    const ca = process.env[TEST_ENV.cosmosCa];
    if (ca) env.COSMOS_CA_FILE = ca;
  }
  Object.assign(env, extra);
  return { env, cleanup: () => rmSync(dataDir, { recursive: true, force: true }) };
}

export async function startTestApp(choice: BackendChoice, extra: Record<string, string> = {}, services: readonly ServiceName[] = SERVICES, options: StartOptions = {}): Promise<TestApp> {
  const { env, cleanup } = backendEnv(choice, extra);
  const config = loadConfig(env);
  const logs: Record<string, unknown>[] = [];
  const logger: Logger = createLogger({ level: 'debug', write: (line) => logs.push(JSON.parse(line)) });
  const backends = await openBackends(config, logger);
  let running;
  try {
    await applyTopics(config, backends.log);
    running = await startServices(config, backends, services, logger, options);
  } catch (error) {
    await backends.close();
    cleanup();
    throw error;
  }
  let stopping: Promise<void> | null = null;
  const stopServices = (receiverGraceMs?: number) => (stopping ??= running.stop(receiverGraceMs));
  return {
    baseUrl: `http://127.0.0.1:${running.port}`,
    port: running.port,
    config,
    topics: pipelineTopics(config.topicPrefix),
    backends,
    logs,
    stopServices,
    async stop() {
      await stopServices();
      await backends.close();
      cleanup();
    },
  };
}
