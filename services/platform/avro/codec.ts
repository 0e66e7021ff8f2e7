/**
 * Avro codec for the pipeline records, in the Avro single-object encoding:
 *
 *   0xC3 0x01 | 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema | Avro binary
 *
 * Writer schemas are looked up by fingerprint among every known schema (the
 * current ones in `schemas/`, every historical one in `schemas/history/`, and any
 * given explicitly), then resolved into the reader schema with avsc resolvers.
 * Types, fingerprints and resolvers are built once per codec and reused.
 *
 * A decoded `bytes` field (a received body, an MDN, a dead letter's value) is a view of the buffer given to
 * decode, not a copy (ViewBytesType below): hand decode only a buffer that nothing writes over while the value is
 * in use. Every log's record values are such buffers (event-log.ts LogRecord). A view keeps the whole buffer
 * alive (a Kafka fetch response, up to 10 MiB): copy a field that is kept past its batch.
 */
import fs from 'fs';
import path from 'path';
import { Type, types } from 'avsc';
import { fingerprint64, fingerprintBytes } from './fingerprint';
import { AVRO_NAMESPACE, Body, isRecordName, RECORD_NAMES, RecordName, RecordTypes } from './records';

/** First two bytes of every single-object encoded record. */
export const SINGLE_OBJECT_MARKER: Readonly<Buffer> = Buffer.from([0xc3, 0x01]);
/** Marker (2 bytes) + fingerprint (8 bytes). */
export const SINGLE_OBJECT_HEADER_LENGTH = 10;

export type AvroDecodeErrorCode =
  /** Missing/wrong 0xC3 0x01 marker, or shorter than the 10-byte header. */
  | 'not-single-object'
  /** The writer fingerprint matches no known schema. */
  | 'unknown-schema'
  /** The writer schema is a different record than the one asked for. */
  | 'wrong-record'
  /** The writer schema cannot be resolved into the reader schema. */
  | 'incompatible-schema'
  /** The Avro payload is truncated, has trailing bytes or is otherwise invalid. */
  | 'malformed';

export class AvroDecodeError extends Error {
  override readonly name = 'AvroDecodeError';
  readonly code: AvroDecodeErrorCode;
  /** Writer fingerprint as it appears in the header (8 bytes, hex), when it could be read. */
  readonly fingerprint?: string;

  constructor(code: AvroDecodeErrorCode, message: string, opts: { fingerprint?: string; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    if (opts.fingerprint !== undefined) this.fingerprint = opts.fingerprint;
  }
}

export type AvroEncodeErrorCode = 'invalid-value' | 'unknown-record';

export class AvroEncodeError extends Error {
  override readonly name = 'AvroEncodeError';
  readonly code: AvroEncodeErrorCode;
  /** Dotted paths of the offending fields (for `invalid-value`). */
  readonly paths: string[];

  constructor(code: AvroEncodeErrorCode, message: string, paths: string[] = []) {
    super(message);
    this.code = code;
    this.paths = paths;
  }
}

export type AvroSchemaErrorCode = 'schema-dir-not-found' | 'missing-schema' | 'invalid-schema' | 'unknown-record';

/** Raised by `createAvroCodec` when the schemas themselves are unusable. */
export class AvroSchemaError extends Error {
  override readonly name = 'AvroSchemaError';
  readonly code: AvroSchemaErrorCode;

  constructor(code: AvroSchemaErrorCode, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.code = code;
  }
}

export interface AvroCodecOptions {
  /** Folder holding `<RecordName>.avsc` (and optionally `history/*.avsc`). Default: the repo's `schemas/`. */
  schemaDir?: string;
  /** Further writer schemas (e.g. older versions) that decode must recognise. */
  extraWriterSchemas?: object[];
  /** Reader schemas to decode into, instead of the current ones (e.g. an older reader). */
  readerSchemas?: Partial<Record<RecordName, object>>;
}

export interface AvroCodec {
  /** Single-object encode `value` with the current schema of `name`. */
  encode<N extends RecordName>(name: N, value: RecordTypes[N]): Buffer;
  /** Decode a single-object record, resolving its writer schema into the reader schema of `name`. */
  decode<N extends RecordName>(name: N, buf: Buffer): RecordTypes[N];
  /** Which record a single-object buffer holds (from its writer schema). */
  nameOf(buf: Buffer): RecordName;
  /** 8-byte little-endian fingerprint of the current schema of `name` (a copy). */
  fingerprintOf(name: RecordName): Buffer;
}

type AvscSchema = Parameters<typeof Type.forSchema>[0];
type Resolver = ReturnType<Type['createResolver']>;

interface WriterEntry {
  name: RecordName;
  type: Type;
  /** Header fingerprint bytes as hex (little-endian, as on the wire). */
  hex: string;
}

interface ReaderEntry {
  type: Type;
  hex: string;
  /** Per writer fingerprint hex: resolver, `null` when writer = reader, or the resolution failure. */
  resolvers: Map<string, Resolver | null | Error>;
}

interface CurrentEntry {
  type: Type;
  /** Marker + fingerprint. */
  header: Buffer;
}

const SLAB_BYTES = 64 * 1024;
const INLINE_BRANCH = `${AVRO_NAMESPACE}.InlineBody`;
const REF_BRANCH = `${AVRO_NAMESPACE}.BodyRef`;

/**
 * The `schemas/` folder next to the nearest package.json above `startDir`
 * (works from TS sources and from compiled `dist/...` alike).
 */
export function findSchemaDir(startDir: string = __dirname): string {
  let dir = path.resolve(startDir);
  for (;;) {
    const candidate = path.join(dir, 'schemas');
    if (fs.existsSync(path.join(dir, 'package.json')) && isDirectory(candidate)) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) {
      throw new AvroSchemaError('schema-dir-not-found', `no schemas/ folder next to a package.json above ${startDir}`);
    }
    dir = parent;
  }
}

export function createAvroCodec(opts: AvroCodecOptions = {}): AvroCodec {
  const schemaDir = opts.schemaDir !== undefined ? path.resolve(opts.schemaDir) : findSchemaDir();
  if (!isDirectory(schemaDir)) {
    throw new AvroSchemaError('schema-dir-not-found', `schema folder ${schemaDir} does not exist`);
  }

  const current = new Map<RecordName, CurrentEntry>();
  const readers = new Map<RecordName, ReaderEntry>();
  const writers = new Map<string, WriterEntry>();

  // Current schemas: the writers for encode, and the default readers.
  const currentTypes = new Map<RecordName, Type>();
  for (const name of RECORD_NAMES) {
    const file = path.join(schemaDir, `${name}.avsc`);
    if (!fs.existsSync(file)) throw new AvroSchemaError('missing-schema', `missing schema file ${file}`);
    const type = parseSchema(readSchemaFile(file), file);
    if (type.name !== fullName(name)) {
      throw new AvroSchemaError('invalid-schema', `${file} defines ${String(type.name)}, expected ${fullName(name)}`);
    }
    currentTypes.set(name, type);
    const fp = fingerprintBytes(fingerprint64(type));
    current.set(name, { type, header: Buffer.concat([SINGLE_OBJECT_MARKER, fp]) });
  }

  for (const name of RECORD_NAMES) {
    const override = opts.readerSchemas?.[name];
    const type = override !== undefined ? parseSchema(override, `reader schema for ${name}`) : currentTypes.get(name)!;
    if (override !== undefined && !namesOf(type).includes(fullName(name))) {
      throw new AvroSchemaError('invalid-schema', `reader schema for ${name} is ${String(type.name)}, expected ${fullName(name)}`);
    }
    readers.set(name, { type, hex: fingerprintBytes(fingerprint64(type)).toString('hex'), resolvers: new Map() });
  }

  const addWriter = (type: Type, origin: string): void => {
    const name = recordNameOfWriter(type);
    if (name === undefined) {
      throw new AvroSchemaError(
        'unknown-record',
        `${origin}: ${String(type.name)} is none of ${RECORD_NAMES.map(fullName).join(', ')} (nor aliased by their reader schemas)`,
      );
    }
    const hex = fingerprintBytes(fingerprint64(type)).toString('hex');
    if (!writers.has(hex)) writers.set(hex, { name, type, hex });
  };

  const recordNameOfWriter = (type: Type): RecordName | undefined => {
    for (const candidate of namesOf(type)) {
      const prefix = `${AVRO_NAMESPACE}.`;
      if (candidate.startsWith(prefix)) {
        const local = candidate.slice(prefix.length);
        if (isRecordName(local)) return local;
      }
    }
    // A renamed historical record is recognised by the reader's aliases.
    for (const [name, reader] of readers) {
      if (type.name !== undefined && (reader.type.aliases ?? []).includes(type.name)) return name;
    }
    return undefined;
  };

  for (const name of RECORD_NAMES) addWriter(currentTypes.get(name)!, path.join(schemaDir, `${name}.avsc`));
  const historyDir = path.join(schemaDir, 'history');
  if (isDirectory(historyDir)) {
    for (const entry of fs.readdirSync(historyDir).filter((f) => f.endsWith('.avsc')).sort()) {
      const file = path.join(historyDir, entry);
      addWriter(parseSchema(readSchemaFile(file), file), file);
    }
  }
  (opts.extraWriterSchemas ?? []).forEach((schema, i) => {
    addWriter(parseSchema(schema, `extraWriterSchemas[${i}]`), `extraWriterSchemas[${i}]`);
  });

  /**
   * Records are encoded straight into a shared slab and handed out as views of it: no copy and no
   * buffer of their own (the receiver encodes one per request). A view keeps its slab alive, so a slab
   * is small (64 KiB). A record that does not fit in what is left starts a fresh slab only if it is at
   * most an eighth of one; a larger one gets a buffer of its own.
   */
  let slab = Buffer.allocUnsafe(SLAB_BYTES);
  let slabUsed = 0;
  let scratch = Buffer.allocUnsafe(64 * 1024);

  const writerOf = (buf: Buffer): WriterEntry => {
    if (!Buffer.isBuffer(buf)) {
      throw new AvroDecodeError('not-single-object', 'not an Avro single-object record (not a Buffer)');
    }
    if (buf.length < 2 || buf[0] !== 0xc3 || buf[1] !== 0x01) {
      const start = buf.subarray(0, 2).toString('hex') || 'empty';
      throw new AvroDecodeError('not-single-object', `not an Avro single-object record (no C3 01 marker, starts with ${start})`);
    }
    if (buf.length < SINGLE_OBJECT_HEADER_LENGTH) {
      throw new AvroDecodeError(
        'not-single-object',
        `not an Avro single-object record (truncated header: ${buf.length} of ${SINGLE_OBJECT_HEADER_LENGTH} bytes)`,
      );
    }
    const hex = buf.toString('hex', 2, SINGLE_OBJECT_HEADER_LENGTH);
    const writer = writers.get(hex);
    if (writer === undefined) {
      throw new AvroDecodeError(
        'unknown-schema',
        `unknown Avro writer schema fingerprint ${hex} (CRC-64-AVRO 0x${buf.readBigUInt64LE(2).toString(16).padStart(16, '0')})`,
        { fingerprint: hex },
      );
    }
    return writer;
  };

  const resolverFor = (name: RecordName, reader: ReaderEntry, writer: WriterEntry): Resolver | undefined => {
    let resolver = reader.resolvers.get(writer.hex);
    if (resolver === undefined) {
      if (writer.hex === reader.hex) {
        resolver = null;
      } else {
        try {
          resolver = reader.type.createResolver(writer.type);
        } catch (err) {
          resolver = err instanceof Error ? err : new Error(String(err));
        }
      }
      reader.resolvers.set(writer.hex, resolver);
    }
    if (resolver instanceof Error) {
      throw new AvroDecodeError(
        'incompatible-schema',
        `cannot read ${String(writer.type.name)} written with schema ${writer.hex} using the reader schema for ${name}: ${resolver.message}`,
        { fingerprint: writer.hex, cause: resolver },
      );
    }
    return resolver ?? undefined;
  };

  return {
    encode<N extends RecordName>(name: N, value: RecordTypes[N]): Buffer {
      const entry = current.get(name);
      if (entry === undefined) throw new AvroEncodeError('unknown-record', `unknown record name ${String(name)}`);
      const avroValue: unknown = name === 'Received' ? receivedToAvro(value as RecordTypes['Received']) : value;
      if (!entry.type.isValid(avroValue)) throw invalidValue(name, entry.type, avroValue);
      for (let attempt = 0; attempt < 2; attempt++) {
        entry.header.copy(slab, slabUsed);
        const end = entry.type.encode(avroValue, slab, slabUsed + SINGLE_OBJECT_HEADER_LENGTH);
        if (end >= 0) {
          const out = slab.subarray(slabUsed, end);
          slabUsed = end;
          return out;
        }
        // Did not fit in what is left: a fresh slab, if the record is small enough to share one.
        if (SLAB_BYTES - end - slabUsed > SLAB_BYTES / 8) break;
        slab = Buffer.allocUnsafe(SLAB_BYTES);
        slabUsed = 0;
      }
      entry.header.copy(scratch, 0);
      let end = entry.type.encode(avroValue, scratch, SINGLE_OBJECT_HEADER_LENGTH);
      if (end < 0) {
        scratch = Buffer.allocUnsafe(Math.max(scratch.length * 2, scratch.length - end + 1024));
        entry.header.copy(scratch, 0);
        end = entry.type.encode(avroValue, scratch, SINGLE_OBJECT_HEADER_LENGTH);
      }
      const out = Buffer.allocUnsafe(end);
      scratch.copy(out, 0, 0, end);
      return out;
    },

    decode<N extends RecordName>(name: N, buf: Buffer): RecordTypes[N] {
      const reader = readers.get(name);
      if (reader === undefined) throw new AvroDecodeError('wrong-record', `unknown record name ${String(name)}`);
      const writer = writerOf(buf);
      if (writer.name !== name) {
        throw new AvroDecodeError('wrong-record', `record is a ${writer.name}, not a ${name} (writer schema ${writer.hex})`, {
          fingerprint: writer.hex,
        });
      }
      const resolver = resolverFor(name, reader, writer);
      let value: unknown;
      try {
        value = reader.type.fromBuffer(buf.subarray(SINGLE_OBJECT_HEADER_LENGTH), resolver);
      } catch (err) {
        throw new AvroDecodeError('malformed', `malformed ${name} record: ${err instanceof Error ? err.message : String(err)}`, {
          fingerprint: writer.hex,
          cause: err,
        });
      }
      if (name === 'Received') receivedFromAvro(value as Record<string, unknown>);
      return value as RecordTypes[N];
    },

    nameOf(buf: Buffer): RecordName {
      return writerOf(buf).name;
    },

    fingerprintOf(name: RecordName): Buffer {
      const entry = current.get(name);
      if (entry === undefined) throw new AvroEncodeError('unknown-record', `unknown record name ${String(name)}`);
      return Buffer.from(entry.header.subarray(2));
    },
  };
}

/**
 * The encoded length of an Avro `bytes` value of `n` bytes: its length as a zig-zag varint, then the bytes.
 * So a record's size for any body can be had from its encoding with an empty one, without the body.
 */
export function avroBytesLength(n: number): number {
  let rest = n * 2; // zig-zag of a length, which is never negative (multiplied: a shift would wrap at 2^31)
  let size = 1;
  while (rest >= 0x80) { rest = Math.floor(rest / 0x80); size++; }
  return size + n;
}

let defaultCodec: AvroCodec | undefined;

/** A process-wide codec over the repo's `schemas/` (built on first use). */
export function defaultAvroCodec(): AvroCodec {
  return (defaultCodec ??= createAvroCodec());
}

function fullName(name: RecordName): string {
  return `${AVRO_NAMESPACE}.${name}`;
}

function namesOf(type: Type): string[] {
  return [...(type.name !== undefined ? [type.name] : []), ...(type.aliases ?? [])];
}

function isDirectory(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

function readSchemaFile(file: string): object {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as object;
  } catch (err) {
    throw new AvroSchemaError('invalid-schema', `cannot read schema ${file}: ${(err as Error).message}`, err);
  }
}

function parseSchema(schema: object, origin: string): Type {
  let type: Type;
  try {
    // 'auto': unions are plain values (null|string → string | null) unless ambiguous,
    // as the two-record body union is, which avsc wraps ({ 'ingress.v1.InlineBody': {...} }).
    type = Type.forSchema(schema as AvscSchema, { wrapUnions: 'auto', omitRecordMethods: true, typeHook: viewBytesHook });
  } catch (err) {
    throw new AvroSchemaError('invalid-schema', `invalid Avro schema (${origin}): ${(err as Error).message}`, err);
  }
  if (type.typeName !== 'record') {
    throw new AvroSchemaError('invalid-schema', `${origin} is a ${type.typeName}, expected a record`);
  }
  return type;
}

/** avsc's reading position over the buffer being decoded (its Tap, which its typings leave out). */
interface Tap {
  buf: Buffer;
  pos: number;
  readLong(): number;
  _invalidate(): void;
}

/**
 * avsc reads a `bytes` value by copying it out of the buffer it decodes into a pool of its own (Tap.readFixed): a
 * body of a few KiB was copied so by every stage that decoded a Received record, after the log had read it into
 * memory of its own already. This type reads it as avsc does (its length, then that many bytes; a value that runs
 * past the end leaves the tap invalid, and fromBuffer throws 'truncated buffer'), as a view of the decoded buffer.
 * Every `bytes` of the codec's schemas is one (parseSchema's typeHook), so a resolver (an older writer's record read
 * into the current reader) reads its bytes so too; writing is avsc's own.
 */
class ViewBytesType extends types.BytesType {
  _read(tap: Tap): Buffer | undefined {
    const length = tap.readLong();
    if (length < 0) {
      tap._invalidate();
      return undefined;
    }
    const start = tap.pos;
    tap.pos += length;
    return tap.pos > tap.buf.length ? undefined : tap.buf.subarray(start, tap.pos);
  }
}

function viewBytesHook(schema: unknown): Type | undefined {
  const isBytes = schema === 'bytes' || (typeof schema === 'object' && schema !== null && (schema as { type?: unknown }).type === 'bytes');
  return isBytes ? new ViewBytesType() : undefined;
}

function invalidValue(name: RecordName, type: Type, value: unknown): AvroEncodeError {
  const problems: string[] = [];
  const paths: string[] = [];
  type.isValid(value, {
    errorHook: (p: string[], val: unknown) => {
      const at = p.join('.') || '(record)';
      paths.push(at);
      problems.push(`${at} = ${describe(val)}`);
    },
  });
  return new AvroEncodeError('invalid-value', `invalid ${name} value: ${problems.join('; ') || 'not a record'}`, paths);
}

function describe(val: unknown): string {
  if (val === undefined) return 'undefined';
  if (Buffer.isBuffer(val)) return `<Buffer ${val.length} bytes>`;
  try {
    const text = JSON.stringify(val);
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    return String(val);
  }
}

/**
 * Received with its body in avsc's wrapped-union form. Every field is named in one literal: that is what
 * avsc's generated writer reads fastest (a spread or a copy loop cost µs per request on the accept path).
 * A field added to Received.avsc must be added here too; the codec test that round-trips a record with
 * every schema field set fails until it is.
 */
function receivedToAvro(v: RecordTypes['Received']): unknown {
  return {
    requestId: v.requestId, workflowId: v.workflowId, triggerNode: v.triggerNode, triggerKind: v.triggerKind, pathSuffix: v.pathSuffix,
    query: v.query, headers: v.headers, contentType: v.contentType, body: bodyToAvro(v.body), receivedAt: v.receivedAt,
    principal: v.principal, remoteAddress: v.remoteAddress, as2: v.as2, traceparent: v.traceparent,
    idempotencyKey: v.idempotencyKey ?? null, duplicateOf: v.duplicateOf ?? null,
  };
}

function bodyToAvro(body: Body): unknown {
  if (body === null || typeof body !== 'object') return body;
  const loose = body as Partial<{ kind: string; data: Buffer; path: string; size: number; sha256: string }>;
  const kind = loose.kind ?? (Buffer.isBuffer(loose.data) ? 'inline' : typeof loose.path === 'string' ? 'ref' : undefined);
  // Literal keys, not `[INLINE_BRANCH]`: V8 builds an object with a computed key about a hundred times
  // slower, and avsc's writer then reads it slower too. The round-trip tests fail if they drift.
  if (kind === 'inline') return { 'ingress.v1.InlineBody': { data: loose.data } };
  if (kind === 'ref') return { 'ingress.v1.BodyRef': { path: loose.path, size: loose.size, sha256: loose.sha256 } };
  return body; // left for validation to report
}

/** In place: avsc's wrapped body union → `Body`. */
function receivedFromAvro(value: Record<string, unknown>): void {
  const wrapped = value.body as Record<string, Record<string, unknown> | undefined> | null | undefined;
  if (wrapped === null || typeof wrapped !== 'object') return;
  const inline = wrapped[INLINE_BRANCH];
  if (inline !== undefined) {
    value.body = { kind: 'inline', data: inline.data };
    return;
  }
  const ref = wrapped[REF_BRANCH];
  if (ref !== undefined) value.body = { kind: 'ref', path: ref.path, size: ref.size, sha256: ref.sha256 };
}
