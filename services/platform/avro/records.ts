/**
 * TypeScript shapes of the pipeline's Avro records (schemas/*.avsc, namespace `ingress.v1`).
 *
 * Conventions:
 * - Avro `null|T` unions are `T | null` (always present, never `undefined`).
 * - `long` is a JS `number` (epoch ms and byte sizes stay far below 2^53).
 * - `bytes` is a `Buffer`.
 * - The Received `body` union (two records, which avsc can only represent as a
 *   wrapped union) is exposed as the discriminated union `InlineBody | BodyRef`
 *   tagged by `kind`; the codec maps it to and from Avro's wrapped form. `kind`
 *   is not an Avro field: it only tells which union branch the value is.
 */

/** Avro namespace of every pipeline record. */
export const AVRO_NAMESPACE = 'ingress.v1';

/** Enum `ingress.v1.TriggerKind`. */
export type TriggerKind = 'webhook' | 'as2' | 'logistics' | 'warehouse';

/** Symbols of `ingress.v1.TriggerKind`, in schema order. */
export const TRIGGER_KINDS: readonly TriggerKind[] = Object.freeze(['webhook', 'as2', 'logistics', 'warehouse'] as const);

/** Branch `ingress.v1.InlineBody` of `Received.body`: a body small enough to travel inside the record. */
export interface InlineBody {
  kind: 'inline';
  data: Buffer;
}

/** Branch `ingress.v1.BodyRef` of `Received.body`: a body staged in the object store. */
export interface BodyRef {
  kind: 'ref';
  /** Object-store path of the staged body. */
  path: string;
  /** Size in bytes (Avro long). */
  size: number;
  /** SHA-256 of the body, lower-case hex. */
  sha256: string;
}

/** `Received.body`: Avro union [InlineBody, BodyRef]. */
export type Body = InlineBody | BodyRef;

/** Record `ingress.v1.As2Envelope`. */
export interface As2Envelope {
  messageId: string;
  from: string;
  to: string;
  subject: string | null;
  contentType: string | null;
  /**
   * The processed MDN the receiver answers once the record is durable, as a MIME entity (headers, blank
   * line, body): the bytes sent. The decoder stores it as evidence. Null in records written before the
   * field existed (schemas/history/Received.1.avsc), whose MDN the receiver stored when it answered.
   */
  mdn: Buffer | null;
  /**
   * An asynchronous MDN asked for (Receipt-Delivery-Option) to an allowed URL: `mdn` is delivered there by the
   * mdn stage, and the HTTP answer was empty (schema default null; null for a synchronous MDN).
   */
  asyncMdn: AsyncMdnTarget | null;
  /**
   * The SHA-256 of the SubjectPublicKeyInfo (DER) of the receiver key that opened the message at receipt, hex (null
   * when it was not encrypted, and in records written before the field existed: schemas/history/Received.4.avsc).
   * The decoder opens the message with that key again, current or retired, in whatever certificate of it the
   * credential holds by then. The key, not a certificate: one issued again for the same key opens it too.
   */
  receiverKey: string | null;
}

/** Record `ingress.v1.AsyncMdnTarget`. */
export interface AsyncMdnTarget {
  url: string;
  /** The allow-list entry the URL matched, as configured. */
  allowedBy: string;
}

/** Record `ingress.v1.Received`. */
export interface Received {
  requestId: string;
  workflowId: string;
  triggerNode: string;
  triggerKind: TriggerKind;
  /** Path after /hook/{workflowId}, without the leading slash (schema default null). */
  pathSuffix: string | null;
  /** Query parameters; each name maps to all its values in order. */
  query: Record<string, string[]>;
  /** Lower-case header names; credentials already redacted by the writer. */
  headers: Record<string, string>;
  contentType: string | null;
  body: Body;
  /** Epoch milliseconds. */
  receivedAt: number;
  principal: string | null;
  remoteAddress: string | null;
  as2: As2Envelope | null;
  traceparent: string | null;
  /**
   * The value the node's idempotencyKey option names, when the request has one (schema default null): the
   * decoder requests nothing for a later request of the workflow with the same key inside the window.
   */
  idempotencyKey: string | null;
  /** An earlier accept with the same key that this receiver remembered: a mark for readers; the decoder decides. */
  duplicateOf: string | null;
}

/** Record `ingress.v1.DecodedItem`. */
export interface DecodedItem {
  /** JSON text of the trigger output value. */
  value: string;
  /** Object-store paths staged for this item. */
  files: string[];
  /**
   * The item's place in the request as sent, from 0 (the Message, the attachment; 0 when a trigger makes
   * one item per request), whatever was skipped before it: what its execution id derives from. Null only
   * in records written before the field existed, whose ids came from the position in `items`.
   */
  sourceIndex: number | null;
}

/** Record `ingress.v1.Decoded`. */
export interface Decoded {
  requestId: string;
  workflowId: string;
  triggerNode: string;
  triggerKind: TriggerKind;
  pathSuffix: string | null;
  /** Epoch milliseconds. */
  receivedAt: number;
  items: DecodedItem[];
  /** The earlier request with the same idempotency key inside the window; items are then empty (schema default null). */
  duplicateOf: string | null;
}

/** Record `ingress.v1.ExecutionRequested`. */
export interface ExecutionRequested {
  executionId: string;
  requestId: string;
  workflowId: string;
  triggerNode: string;
  triggerKind: TriggerKind;
  /** JSON text of the execution input. */
  input: string;
  /** Avro int. */
  batchIndex: number;
  /** Avro int. */
  batchSize: number;
  /** Epoch milliseconds. */
  receivedAt: number;
  /** Epoch milliseconds. */
  requestedAt: number;
  /** For a replay, `<topic>/<partition>/<offset>` of the original record re-fed; null for a first attempt (schema default null). */
  replayOf: string | null;
}

/** Record `ingress.v1.SourceRecord`: the Kafka record a DeadLetter preserves. */
export interface SourceRecord {
  topic: string;
  /** Avro int. */
  partition: number;
  /** Kafka offset as a decimal string. */
  offset: string;
  key: Buffer | null;
  value: Buffer;
  headers: Record<string, string>;
}

/** Record `ingress.v1.DeadLetter`. */
export interface DeadLetter {
  stage: string;
  errorCode: string;
  message: string;
  /** Avro int. */
  attempts: number;
  /** Epoch milliseconds. */
  failedAt: number;
  workflowId: string | null;
  source: SourceRecord;
}

/** Record `ingress.v1.MdnAttempt`: one failed delivery attempt of an asynchronous MDN. */
export interface MdnAttempt {
  at: number;
  status: number | null;
  reason: string;
}

/** Record `ingress.v1.MdnDelivery`: an asynchronous AS2 MDN to deliver (services/mdn/). */
export interface MdnDelivery {
  requestId: string;
  workflowId: string;
  /** The AS2 Message-ID of the message answered. */
  messageId: string;
  mdnMessageId: string;
  url: string;
  /** The allow-list entry the URL matched. */
  allowedBy: string;
  /** The MDN as a MIME entity (headers, blank line, body). */
  mdn: Buffer;
  /** Epoch milliseconds: the retry window counts from here. */
  receivedAt: number;
  /** Epoch milliseconds: no attempt before. */
  dueAt: number;
  attempts: MdnAttempt[];
}

/** Enum `ingress.v1.MdnOutcomeKind`. */
export type MdnOutcomeKind = 'delivered' | 'retrying' | 'given_up' | 'dead_lettered';

/** Record `ingress.v1.MdnOutcome`: what one delivery attempt came to. */
export interface MdnOutcome {
  requestId: string;
  workflowId: string;
  messageId: string;
  mdnMessageId: string;
  url: string;
  outcome: MdnOutcomeKind;
  /** Avro int: attempts made, this one included. */
  attempts: number;
  at: number;
  status: number | null;
  reason: string | null;
  nextAttemptAt: number | null;
}

/** Record `ingress.v1.Refused`: a request answered without being accepted, for the request journal. */
export interface Refused {
  requestId: string;
  workflowId: string;
  triggerNode: string | null;
  /** Text, not the TriggerKind enum: a refusal record must not need a schema change for a new kind. */
  triggerKind: string | null;
  /** Avro int. */
  status: number;
  code: string | null;
  /** Epoch milliseconds. */
  receivedAt: number;
  remoteAddress: string | null;
  /** The AS2 Message-Id header as sent, when there was one. */
  messageId: string | null;
  bodyBytes: number;
  traceparent: string | null;
}

/** Local names of the top-level records (full name: `ingress.v1.<name>`, file: `schemas/<name>.avsc`). */
export type RecordName = 'Received' | 'Decoded' | 'ExecutionRequested' | 'DeadLetter' | 'Refused' | 'MdnDelivery' | 'MdnOutcome';

export const RECORD_NAMES: readonly RecordName[] = Object.freeze(['Received', 'Decoded', 'ExecutionRequested', 'DeadLetter', 'Refused', 'MdnDelivery', 'MdnOutcome'] as const);

/** Record name → TypeScript shape. */
export interface RecordTypes {
  Received: Received;
  Decoded: Decoded;
  ExecutionRequested: ExecutionRequested;
  DeadLetter: DeadLetter;
  MdnDelivery: MdnDelivery;
  MdnOutcome: MdnOutcome;
  Refused: Refused;
}

export function isRecordName(name: unknown): name is RecordName {
  return typeof name === 'string' && (RECORD_NAMES as readonly string[]).includes(name);
}
