import type { Readable } from 'node:stream';
import type { As2Envelope, DecodedItem, Received, TriggerKind } from '../platform/avro/records';
import type { CredentialDocument, WorkflowNode } from '../platform/registry/documents';
import type { ObjectStore } from '../platform/store/object-store';
import type { Logger } from '../platform/logger/logger';
import type { Answer } from './answers';

/**
 * A trigger kind plugs into the stages through these steps (DESIGN.md §1):
 *   receiver:   admit (headers only) → inspect (the body, before the durable accept) → accepted (the answer)
 *   decoder:    decode (the received body → one item per execution)
 * The stage loops know nothing else about a kind.
 */

/** What the receiver knows about a request before reading its body. */
export interface InboundRequest {
  requestId: string;
  workflowId: string;
  pathSuffix: string | null;
  query: Record<string, string[]>;
  /** Lower-case names; repeated headers joined with ", ". Secrets still present: never log this. */
  headers: Record<string, string>;
  remoteAddress: string | null;
  receivedAt: number;
}

export interface TriggerServices {
  /** The decrypted credential, or null when none has that id. Throws when it cannot be decrypted. */
  credential(id: string): Promise<CredentialDocument | null>;
  /**
   * The decrypted credential if it is cached now (null: cached as missing), undefined when it would have to be
   * loaded: lets a check that has nothing else to wait for answer without a promise.
   */
  cachedCredential?(id: string): CredentialDocument | null | undefined;
  /** Where a trigger keeps evidence of what it received and answered (AS2 non-repudiation). */
  store: ObjectStore;
  logger: Logger;
}

export type Admission =
  | {
      ok: true; principal: string | null; /** Headers that carried a secret, to redact beyond the defaults. */ secretHeaders: string[];
      /** Headers whose value is a URL to call back (an AS2 asynchronous MDN's), recorded with the query elided. */
      callbackUrlHeaders?: readonly string[];
      /** The caller's address as trusted proxies reported it, recorded instead of the socket peer's; absent: the socket peer. */
      remoteAddress?: string;
    }
  | { ok: false; answer: Answer };

/** The request body as the receiver holds it: in memory when small, else already in the object store. */
export interface ReceivedBody {
  size: number;
  /**
   * Lower-case hex SHA-256 of the bytes as they arrived (before any Content-Encoding is undone). A staged
   * body was hashed while it streamed in; an inline one is hashed on first use (most never need it).
   */
  sha256(): string;
  /** The bytes, when they fit INLINE_BODY_MAX; null when the body was staged to the object store. */
  inline: Buffer | null;
  /** A staged body read back from the object store (a check that could not run while it streamed in); null when inline. */
  readStaged: (() => Promise<Readable>) | null;
}

export interface DecodeServices {
  store: ObjectStore;
  /**
   * The raw body of the received record, wherever it lives. An inline body is streamed from the record's own
   * memory (a view of the log's read, shared with the record a retry decodes again and with a dead letter's
   * copy): never write into the chunks.
   */
  openBody(received: Received): Promise<Readable>;
  /** The raw body in memory, refused beyond `maxBytes`; an inline body is the record's own memory, as above: never write into it. */
  readBody(received: Received, maxBytes: number): Promise<Buffer>;
  /** The decrypted credential, for kinds that must open the body again (AS2); absent where none is wired. */
  credential?(id: string): Promise<CredentialDocument | null>;
  logger: Logger;
}

/**
 * A check that runs on the body while it streams in (framing, decompression bombs), so even a body
 * too large to hold gets a precise answer. The receiver honours its back-pressure.
 */
export interface BodyValidator {
  /** Like Writable.write: false asks the receiver to wait for 'drain'. */
  write(chunk: Buffer): boolean;
  once(event: 'drain', listener: () => void): unknown;
  /** The body ended: the verdict, null when the body is acceptable (at once, without a promise, when nothing is pending). */
  end(): Answer | null | Promise<Answer | null>;
  /** The request is over without a verdict (client gone, too large): release everything. */
  abort(): void;
  /**
   * The validator keeps every byte of an acceptable body for its trigger (wholeBody), and the trigger's
   * inspection always gives `persistBody`: the receiver then neither holds nor stages a copy of its own. So no
   * raw copy reaches the object store, where a secret in it (a WS-Security password) would outlive its
   * redaction in a store that keeps versions or soft-deleted blobs. The body reaches inspect with `inline`
   * and `readStaged` null.
   */
  readonly holdsWhole?: boolean;
}

/** What inspect learnt that the answer may use (e.g. the parsed JSON for `$json` in templates). */
export interface Inspection {
  json?: unknown;
  /** AS2 envelope facts for the received record. */
  as2?: As2Envelope;
  /** Whatever else the plugin's own answer steps need (opaque to the receiver). */
  state?: unknown;
  /**
   * The bytes to keep in the received log instead of the body as it arrived, when those carry a secret
   * (a WS-Security password in a SOAP header). The copy must decode like the original.
   */
  persistBody?: Buffer;
}

export type InspectOutcome = { ok: true; inspection: Inspection } | { ok: false; answer: Answer };

export interface TriggerPlugin {
  /** Workflow node types this plugin serves. */
  readonly nodeTypes: readonly string[];
  /** The kind recorded for a request to this node (a webhook node in AS2 protocol is `as2`). */
  kindOf(node: WorkflowNode): TriggerKind;
  /** Admit and inspect answer at once (not a promise) when they have nothing to wait for: one hop less per request. */
  admit(request: InboundRequest, node: WorkflowNode, services: TriggerServices): Admission | Promise<Admission>;
  /** A streaming check of the body, if this node needs one. */
  validator?(request: InboundRequest, node: WorkflowNode): BodyValidator | null;
  /** A check of the whole body whose failure changes the answer (syntax of small bodies, signatures). */
  inspect(request: InboundRequest, node: WorkflowNode, body: ReceivedBody, services: TriggerServices): InspectOutcome | Promise<InspectOutcome>;
  /** The answer once the request is durable. */
  accepted(request: InboundRequest, node: WorkflowNode, body: ReceivedBody, inspection: Inspection, services: TriggerServices): Answer | Promise<Answer>;
  /**
   * The answer when the durable accept failed, if this kind has its own (an AS2 failure MDN); null or
   * absent → the receiver's 503.
   */
  notAccepted?(request: InboundRequest, node: WorkflowNode, inspection: Inspection, services: TriggerServices): Promise<Answer | null>;
  /**
   * The node's de-duplication (DESIGN.md §5 `idempotencyKey`), or null when it asks for none. The receiver
   * records the key; the decoder decides (services/decoder/idempotency-ledger.ts).
   */
  idempotency?(node: WorkflowNode): Idempotency | null;
  /** Problems with a node's configuration, for `workflows put` (templates, options); empty when fine. */
  validateNode?(node: WorkflowNode): string[];
  /** One item per execution to request; throwing an IngressError dead-letters the record. */
  decode(received: Received, node: WorkflowNode, services: DecodeServices): Promise<DecodedItem[]>;
}

export interface Idempotency {
  /** How long after a request with a key a later one with the same key starts nothing. */
  windowMs: number;
  /** The key of an inspected request, or null when it carries none (it is then accepted and executed as usual). */
  keyOf(request: InboundRequest, body: ReceivedBody, inspection: Inspection): string | null;
}

/** Node types that are triggers but never selected to receive HTTP (DESIGN.md §5). */
export const NEVER_SELECTED = new Set(['errorTrigger']);
