/**
 * jest globalSetup: starts Kafka, Azurite (blob) and cosmosdb-server in parallel, once per run,
 * and publishes their addresses to test workers (which inherit process.env) as:
 *
 *   TEST_KAFKA_BROKERS                      host:port
 *   TEST_AZURE_STORAGE_CONNECTION_STRING    devstoreaccount1 connection string
 *   TEST_COSMOS_ENDPOINT                    https://127.0.0.1:<port>
 *   TEST_COSMOS_KEY                         account key
 *   TEST_COSMOS_CA                          path of the PEM the Cosmos client must trust ('' if none)
 *
 * Kafka runs the version KAFKA_VERSION names (3.9.x or 4.x), else infra/kafka/pom.xml's default (4.4.0).
 *
 * A server is not started when the user already points at one: KAFKA_BROKERS,
 * AZURE_STORAGE_CONNECTION_STRING, COSMOS_ENDPOINT + COSMOS_KEY (+ optional COSMOS_CA).
 * The un-prefixed names are only read here, never set: the application's config reads them, and
 * setting them would switch every test to the real backends.
 */
import {
  startAzurite,
  startCosmos,
  startKafkaForTests,
  TEST_ENV,
  type AzuriteHandle,
  type CosmosHandle,
  type KafkaHandle,
} from './servers';
import { quietKafkajsNegativeTimeouts } from '../../services/cli/process-warnings';

export interface TestServers {
  kafka?: KafkaHandle;
  azurite?: AzuriteHandle;
  cosmos?: CosmosHandle;
}

declare global {
  // eslint-disable-next-line no-var
  var __TEST_SERVERS__: TestServers | undefined;
}

function log(line: string): void {
  process.stderr.write(`[test-servers] ${line}\n`);
}

const secs = (t0: number) => `${((Date.now() - t0) / 1000).toFixed(1)}s`;

export default async function globalSetup(): Promise<void> {
  quietKafkajsNegativeTimeouts();
  const env = process.env;
  const servers: TestServers = {};
  globalThis.__TEST_SERVERS__ = servers;
  if (env.COSMOS_ENDPOINT && !env.COSMOS_KEY) throw new Error('[test-servers] cosmos: COSMOS_ENDPOINT is set but COSMOS_KEY is not');
  if (env.COSMOS_KEY && !env.COSMOS_ENDPOINT) throw new Error('[test-servers] cosmos: COSMOS_KEY is set but COSMOS_ENDPOINT is not');
  if (process.stderr.isTTY) process.stderr.write('\n');

  const tasks: Array<Promise<void>> = [];
  const failures: string[] = [];
  const task = (name: string, fn: () => Promise<void>) =>
    tasks.push(
      fn().catch((e: unknown) => {
        failures.push(`${name} could not start: ${e instanceof Error ? e.message : String(e)}`);
      }),
    );

  if (env.KAFKA_BROKERS && env.KAFKA_VERSION) {
    // The 3.9 job (npm run test:kafka-3.9) would pass against whatever KAFKA_BROKERS names.
    throw new Error(`[test-servers] kafka: KAFKA_VERSION=${env.KAFKA_VERSION} picks the broker the suite starts, but KAFKA_BROKERS is set and no broker is started; unset one of them`);
  }
  if (env.KAFKA_BROKERS) {
    env[TEST_ENV.kafkaBrokers] = env.KAFKA_BROKERS;
    log(`kafka ${env.KAFKA_BROKERS} (from KAFKA_BROKERS, not started)`);
  } else {
    task('kafka', async () => {
      const t0 = Date.now();
      const kafka = await startKafkaForTests();
      servers.kafka = kafka;
      env[TEST_ENV.kafkaBrokers] = kafka.brokers;
      log(`kafka ${kafka.brokers} (Kafka ${kafka.version}) ready in ${secs(t0)}`);
    });
  }

  if (env.AZURE_STORAGE_CONNECTION_STRING) {
    env[TEST_ENV.azureStorageConnectionString] = env.AZURE_STORAGE_CONNECTION_STRING;
    log('azurite not started: using AZURE_STORAGE_CONNECTION_STRING');
  } else {
    task('azurite', async () => {
      const t0 = Date.now();
      const azurite = await startAzurite();
      servers.azurite = azurite;
      env[TEST_ENV.azureStorageConnectionString] = azurite.connectionString;
      log(`azurite ${azurite.blobEndpoint} ready in ${secs(t0)}`);
    });
  }

  if (env.COSMOS_ENDPOINT && env.COSMOS_KEY) {
    env[TEST_ENV.cosmosEndpoint] = env.COSMOS_ENDPOINT;
    env[TEST_ENV.cosmosKey] = env.COSMOS_KEY;
    env[TEST_ENV.cosmosCa] = env.COSMOS_CA ?? '';
    log(`cosmos ${env.COSMOS_ENDPOINT} (from COSMOS_ENDPOINT, not started)`);
  } else {
    task('cosmos', async () => {
      const t0 = Date.now();
      const cosmos = await startCosmos();
      servers.cosmos = cosmos;
      env[TEST_ENV.cosmosEndpoint] = cosmos.endpoint;
      env[TEST_ENV.cosmosKey] = cosmos.key;
      env[TEST_ENV.cosmosCa] = cosmos.caPath;
      log(`cosmos ${cosmos.endpoint} ready in ${secs(t0)} (https, CA ${cosmos.caPath})`);
    });
  }

  await Promise.all(tasks);

  if (failures.length > 0) {
    // Do not leave the servers that did start running behind a failed setup.
    await Promise.allSettled(
      [servers.kafka, servers.azurite, servers.cosmos].filter((s) => s !== undefined).map((s) => s.stop()),
    );
    globalThis.__TEST_SERVERS__ = undefined;
    for (const name of Object.values(TEST_ENV)) delete env[name];
    throw new Error(`[test-servers] ${failures.join('\n[test-servers] ')}`);
  }
}
