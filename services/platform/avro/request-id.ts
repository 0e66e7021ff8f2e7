import type { AvroCodec } from './codec';

/**
 * The request a record belongs to, when it is one of ours and decodes: every record carries its request's id but
 * a dead letter, whose source record does (null for it, and for bytes that are not a record of ours).
 */
export function requestIdOf(value: Buffer, codec: AvroCodec): string | null {
  try {
    const name = codec.nameOf(value);
    return name === 'DeadLetter' ? null : codec.decode(name, value).requestId;
  } catch {
    return null;
  }
}
