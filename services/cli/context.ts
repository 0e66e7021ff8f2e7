import type { AdminClient } from '../admin/client';
import type { Config } from '../platform/config/config';
import type { EventLog } from '../platform/log/event-log';
import type { Logger } from '../platform/logger/logger';
import type { CredentialSealer } from '../platform/registry/credential-crypto';
import type { Registry } from '../platform/registry/registry';
import type { ObjectStore } from '../platform/store/object-store';

/** What a command may use; opened lazily, so `workflows list` never touches Kafka. */
export interface CommandContext {
  config: Config;
  /** The environment `config` was read from: what the stage worker thread and telemetry read too. */
  env: NodeJS.ProcessEnv;
  logger: Logger;
  out(line: string): void;
  err(line: string): void;
  /** Read-only on the embedded log, so it works alongside a running service. */
  openLog(): Promise<EventLog>;
  /** For commands that append (replays): on the embedded log this takes the DATA_DIR lock, so no service may run. */
  openLogForWriting(): Promise<EventLog>;
  openStore(): Promise<ObjectStore>;
  openRegistry(): Promise<Registry>;
  sealer(): CredentialSealer;
  /** The running service's management API, when one is found (services/admin/client.ts): write commands go through it. */
  runningService(): Promise<AdminClient | null>;
}
