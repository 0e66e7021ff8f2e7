import type * as http from 'node:http';
import * as path from 'node:path';
import { defaultAvroCodec } from '../platform/avro/codec';
import { hookBaseUrl, type Config } from '../platform/config/config';
import type { EventLog } from '../platform/log/event-log';
import { pipelineTopics } from '../platform/log/topics';
import type { Logger } from '../platform/logger/logger';
import type { CredentialSealer } from '../platform/registry/credential-crypto';
import type { Registry } from '../platform/registry/registry';
import type { ObjectStore } from '../platform/store/object-store';
import type { TriggerCatalog } from '../triggers/catalog';
import { createAdminApi } from './api';
import { LocalAccessTaken, localAccessTakenNotice, writeLocalAccess, type LocalAccessHandle } from './local-access';
import { openReplayJobs } from './replay-jobs';

/**
 * The management API of a running service, put together from its own backends (`ingress start` calls this
 * once they are open): the express app for the admin port, the replay jobs it runs, and the DATA_DIR file
 * through which the CLI on this machine finds it.
 */
export interface ManagementApi {
  listener: http.RequestListener;
  /** Stop running replays (resumable), and withdraw the local CLI's access. */
  stop(): Promise<void>;
}

export interface ManagementApiOptions {
  config: Config;
  /** The admin port actually listened on (ADMIN_PORT may be 0 in tests). */
  adminPort: number;
  /** The port the receiver of this process listens on (PORT may be 0), for hook URLs; null when it runs elsewhere. */
  ingressPort: number | null;
  log: EventLog;
  registry: Registry;
  sealer: CredentialSealer | null;
  /** Where the replay ledger is kept: the object store every process of the deployment shares. */
  store: ObjectStore;
  /** For workflow validation and trigger nodes: the catalogue `workflows put` validates with. */
  catalog: TriggerCatalog;
  logger: Logger;
}

export async function startManagementApi(options: ManagementApiOptions): Promise<ManagementApi> {
  const { config, logger } = options;
  const topics = pipelineTopics(config.topicPrefix);
  const codec = defaultAvroCodec();
  const replays = await openReplayJobs({
    log: options.log, dir: path.join(config.dataDir, 'replay'), logger, ledgerCap: config.replayLedgerMaxOriginals, landingWindowMs: config.replayLandingWindowMs, store: options.store,
    context: { topics, codec, recordKey: config.recordKey, skipped: (message) => logger.warn(message) },
  });
  let local: LocalAccessHandle | null = null;
  try {
    local = await writeLocalAccess(config.dataDir, config.adminHost, options.adminPort, hookBaseUrl(config, options.ingressPort));
  } catch (error) {
    if (error instanceof LocalAccessTaken) {
      const notice = localAccessTakenNotice(error.pid, config.cosmos === null || config.blob === null);
      logger[notice.level](notice.message, { file: error.file, pid: error.pid, adminPort: options.adminPort });
    } else {
      logger.warn('the CLI on this machine cannot find this service (DATA_DIR/admin-api.json not written); it may use ADMIN_URL and ADMIN_TOKEN', { error: (error as Error).message });
    }
  }
  const tokens = local ? [...config.adminTokens, local.token] : config.adminTokens;
  if (config.adminTokens.length === 0) logger.info('management API: no ADMIN_TOKENS configured; only the CLI on this machine can use it', { url: `/api/v1` });
  const app = createAdminApi({
    registry: options.registry, sealer: options.sealer, log: options.log, catalog: options.catalog, topics,
    executionQueues: [...new Set(Object.values(config.executionQueues))], codec, recordKey: config.recordKey,
    publicBaseUrl: hookBaseUrl(config, options.ingressPort), traceUrlTemplate: config.journal.traceUrl, replays, tokens: () => tokens, logger: logger.child({ service: 'admin-api' }),
  });
  return {
    listener: app,
    async stop() {
      await replays.stop();
      await local?.remove();
    },
  };
}
