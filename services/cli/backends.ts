import type { Config } from '../platform/config/config';
import { prepareDataDir } from '../platform/config/data-dir';
import type { EventLog } from '../platform/log/event-log';
import type { Logger } from '../platform/logger/logger';
import { createCredentialSealer, type CredentialSealer } from '../platform/registry/credential-crypto';
import type { Registry } from '../platform/registry/registry';
import type { ObjectStore } from '../platform/store/object-store';

/**
 * Open the adapters the environment selects (DESIGN.md §3): Kafka or the embedded log, Azure Blob or
 * the filesystem, Cosmos DB or JSON files. The service and the CLI both come through here, so they
 * always see the same backends.
 */
export interface Backends {
  log: EventLog;
  store: ObjectStore;
  registry: Registry;
  sealer: CredentialSealer | null;
  close(): Promise<void>;
}

export interface OpenBackendsOptions {
  /** The CLI reads the embedded log while the service writes it: no lock, no writes. */
  readOnlyLog?: boolean;
  /** A log that is open already (the stage worker's proxy of the main thread's embedded log): taken over, and closed with the rest. */
  log?: EventLog;
}

export async function openLog(config: Config, logger: Logger, options: OpenBackendsOptions = {}): Promise<EventLog> {
  if (config.kafka) {
    const { openKafkaLog } = await import('../platform/log/kafka/kafka-log');
    const { brokers, clientId, sessionTimeoutMs, heartbeatIntervalMs, lingerMs } = config.kafka;
    return openKafkaLog({
      brokers, clientId, groupPrefix: config.topicPrefix, logger, stage: { sessionTimeout: sessionTimeoutMs, heartbeatInterval: heartbeatIntervalMs },
      linger: { maxMs: lingerMs },
    });
  }
  const { openEmbeddedLog } = await import('../platform/log/embedded/embedded-log');
  if (!options.readOnlyLog) await prepareDataDir(config.dataDir);
  return openEmbeddedLog({
    dataDir: config.dataDir, readOnly: options.readOnlyLog, onWarning: (m) => logger.warn(m),
    // Another process writes the folder now: no graceful stop (its stages would commit), exit at once.
    // Deliberately without the crash guard's markStopping, so what the stages hold counts as after a kill -9:
    // - the folder is the taker's now, and its crash marks are objects in it (the filesystem store): a `stopped`
    //   rewrite that lands before the taker's first mark would excuse the record for the taker, and waiting for the
    //   stage worker to write it leaves the handlers running, writing to the store and registry meanwhile;
    // - a lock is lost only after this process stalled past the heartbeat (the taker saw LOCK unchanged for 10 s):
    //   a record in hand across such a stall may be its cause (a heap-thrashing record blocks the event loop in
    //   GC), which a stop does not excuse either (STOP_EXCUSES_MS: marks that old are not rewritten);
    // - the cost is one strike, cleared by the record's next handling (crash-guard.ts): the guard's side to err on.
    onLockLost: (error) => {
      logger.error(error.message);
      process.exit(1);
    },
  });
}

export async function openStore(config: Config, logger?: Logger): Promise<ObjectStore> {
  if (config.blob) {
    const { openAzureBlobStore } = await import('../platform/store/azure-blob-store');
    return openAzureBlobStore(config.blob);
  }
  const { openFilesystemStore } = await import('../platform/store/filesystem-store');
  await prepareDataDir(config.dataDir);
  return openFilesystemStore(config.dataDir, { onUnflushed: logger && ((message, fields) => logger.warn(message, fields)) });
}

export async function openRegistry(config: Config, logger?: Logger): Promise<Registry> {
  if (config.cosmos) {
    const { openCosmosRegistry } = await import('../platform/registry/cosmos-registry');
    return openCosmosRegistry({ ...config.cosmos, journalRetentionDays: config.journal.retentionDays });
  }
  const { openFileRegistry } = await import('../platform/registry/file-registry');
  await prepareDataDir(config.dataDir);
  return openFileRegistry(config.dataDir, {
    journalRetentionDays: config.journal.retentionDays,
    // The embedded log's directory lock leaves one process per DATA_DIR that can run the sampler.
    onlySampleWriter: config.kafka === null,
    onWarning: logger && ((message, fields) => logger.warn(message, fields)),
  });
}

export function sealerFor(config: Config): CredentialSealer | null {
  return config.encryptionKey ? createCredentialSealer(config.encryptionKey, config.previousEncryptionKey) : null;
}

export async function openBackends(config: Config, logger: Logger, options: OpenBackendsOptions = {}): Promise<Backends> {
  const opened: { close(): Promise<void> }[] = [];
  try {
    const registry = await openRegistry(config, logger); opened.push(registry);
    const store = await openStore(config, logger); opened.push(store);
    const log = options.log ?? await openLog(config, logger, options); opened.push(log);
    return {
      log, store, registry, sealer: sealerFor(config),
      async close() { for (const b of opened.reverse()) await b.close().catch(() => undefined); },
    };
  } catch (error) {
    for (const b of opened.reverse()) await b.close().catch(() => undefined);
    await options.log?.close().catch(() => undefined);
    throw error;
  }
}
