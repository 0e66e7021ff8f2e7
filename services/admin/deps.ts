import type { AvroCodec } from '../platform/avro/codec';
import type { AdminToken } from '../platform/config/admin-settings';
import type { EventLog } from '../platform/log/event-log';
import type { RecordKeyMode } from '../platform/log/record-keys';
import type { PipelineTopics } from '../platform/log/topics';
import type { Logger } from '../platform/logger/logger';
import type { CredentialSealer } from '../platform/registry/credential-crypto';
import type { Registry } from '../platform/registry/registry';
import type { TriggerCatalog } from '../triggers/catalog';
import type { ReplayJobs } from './replay-jobs';

/** What the management API works with; `cli/start.ts` passes the running service's own backends and catalogue. */
export interface AdminApiDeps {
  registry: Registry;
  /** Null when INGRESS_ENCRYPTION_KEY is not set: credentials cannot be stored, nor certificates read. */
  sealer: CredentialSealer | null;
  log: EventLog;
  catalog: TriggerCatalog;
  topics: PipelineTopics;
  /** Every execution queue (the default one and the per-kind ones), for the tail. */
  executionQueues: readonly string[];
  codec: AvroCodec;
  recordKey: RecordKeyMode;
  /** The base of hook URLs (config.ts hookBaseUrl), null when not known. */
  publicBaseUrl: string | null;
  /** JOURNAL_TRACE_URL: a journal entry's link to its trace, `{traceId}` filled in; absent or null for none. */
  traceUrlTemplate?: string | null;
  replays: ReplayJobs;
  /** ADMIN_TOKENS, and the local CLI's token; a function so that the local token can be added once written. */
  tokens(): readonly AdminToken[];
  logger: Logger;
  /** The largest request body (a workflow or credential document); default 1 MiB. */
  maxBodyBytes?: number;
  /** How long a quiet source means its end when a listing reads a topic to its end (Kafka's commit markers are never delivered). */
  listQuietMs?: number;
  /** How often the live tail sends a comment line so that proxies keep an idle stream open; default 15 s. */
  tailKeepAliveMs?: number;
  now?(): number;
}
