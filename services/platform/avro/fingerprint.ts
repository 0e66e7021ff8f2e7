/**
 * CRC-64-AVRO (Rabin) schema fingerprints, as defined by the Avro specification
 * ("Schema Fingerprints"), over a schema's Parsing Canonical Form.
 *
 * avsc's `Type#schema()` (no options) already yields the Parsing Canonical Form:
 * full names, only the attributes name/type/fields/symbols/items/values/size in
 * that order, no doc/aliases/defaults/order/logicalType, no whitespace.
 */
import { Type } from 'avsc';

/** The spec's "empty" fingerprint (also the CRC polynomial). */
export const CRC64_AVRO_EMPTY = 0xc15d213aa4d7a795n;

const TABLE: readonly bigint[] = (() => {
  const table: bigint[] = new Array(256);
  for (let i = 0; i < 256; i++) {
    let fp = BigInt(i);
    for (let j = 0; j < 8; j++) {
      fp = (fp >> 1n) ^ (fp & 1n ? CRC64_AVRO_EMPTY : 0n);
    }
    table[i] = fp;
  }
  return table;
})();

/** CRC-64-AVRO of `data` (a string is hashed as UTF-8), as an unsigned 64-bit bigint. */
export function crc64Avro(data: Buffer | Uint8Array | string): bigint {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let fp = CRC64_AVRO_EMPTY;
  for (let i = 0; i < bytes.length; i++) {
    fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(bytes[i])) & 0xffn)];
  }
  return fp;
}

/**
 * Parsing Canonical Form of a schema: an avsc Type, a schema object, a type name
 * such as `'int'`, or the JSON text of a schema (e.g. `'"int"'` or `'{"type":...}'`).
 */
export function parsingCanonicalForm(schema: Type | object | string): string {
  return JSON.stringify(toType(schema).schema());
}

/** CRC-64-AVRO fingerprint of the schema's Parsing Canonical Form, as an unsigned bigint. */
export function fingerprint64(schema: Type | object | string): bigint {
  return crc64Avro(parsingCanonicalForm(schema));
}

/**
 * The 8-byte little-endian CRC-64-AVRO fingerprint of the schema's Parsing
 * Canonical Form, as written in the Avro single-object encoding header.
 */
export function fingerprint(schema: Type | object | string): Buffer {
  return fingerprintBytes(fingerprint64(schema));
}

/** Little-endian 8-byte form of a 64-bit fingerprint. */
export function fingerprintBytes(fp: bigint): Buffer {
  const buf = Buffer.alloc(8);
  buf.writeBigUInt64LE(BigInt.asUintN(64, fp));
  return buf;
}

/** Schema argument accepted by avsc (its typings do not export the name). */
type AvscSchema = Parameters<typeof Type.forSchema>[0];

function toType(schema: Type | object | string): Type {
  if (Type.isType(schema)) return schema as Type;
  let parsed: unknown = schema;
  if (typeof schema === 'string') {
    const trimmed = schema.trim();
    parsed = /^[[{"]/.test(trimmed) ? JSON.parse(trimmed) : trimmed;
  }
  return Type.forSchema(parsed as AvscSchema, { wrapUnions: 'auto' });
}
