import type { Readable } from 'node:stream';
import type { Body, DecodedItem, Received } from '../../platform/avro/records';
import { IngressError } from '../answers';
import type { DecodeServices } from '../trigger';
import { ObjectStoreError } from '../../platform/store/object-store';
import { createInflater, EncodingError, inflateSync, parseEncoding } from './content-encoding';
import { DEFAULT_FORM_MAX_FIELDS, parseForm } from './form';
import { bodyKind, decodeText, parseMediaType, withoutUtf8Bom, type BodyKind } from './media-type';
import { MultipartError, stageMultipart, type MultipartLimits } from './multipart';
import type { WebhookParameters } from './parameters';
import { stagedMediaType, stagingFolder } from '../staged-files';
import { jsonNestsDeeperThan, TOO_DEEP } from '../json-depth';
import { parseKeepingNumbers } from '../json-numbers';

/**
 * The webhook's output for one received request (SPEC §2.2), keyed later by the node name:
 *   JSON (and any unrecognised type) → the parsed value; form → field → string; multipart → fields and
 *   staged file paths; XML → the raw string; text/plain → { text }; Raw Body → { file };
 *   legacy Binary Data → { <property>: file }.
 * Content-Encoding is undone first, bounded. A body that cannot be read as its type is an IngressError:
 * the decoder dead-letters it (with the raw request, so a replay after a fix can read it again).
 */
export interface WebhookDecodeLimits {
  maxInflatedBytes: number;
  /**
   * MAX_INFLATION_RATIO (content-encoding.ts). The receiver refuses a body past it as it streams in; the decoder
   * holds bodies to it again, of their whole compressed size, so a record appended before the bound existed (or
   * under a higher one) costs no more than it allows.
   */
  maxInflationRatio: number;
  /** Largest body decoded in memory (JSON, forms, XML, text); multipart and raw bodies stream. */
  maxInMemoryBytes: number;
  /** The most pairs one URL-encoded form may carry (FORM_MAX_FIELDS); the receiver holds forms to it too. */
  maxFormFields: number;
  multipart: MultipartLimits;
}

const bodySize = (body: Body) => (body.kind === 'inline' ? body.data.length : body.size);

/** The staged file's extension: by what the type really says, `.bin` for anything else. */
function extensionOf(type: string): string {
  if (type === 'application/json' || type.endsWith('+json')) return '.json';
  if (bodyKind(type) === 'xml') return '.xml';
  if (type === 'text/plain') return '.txt';
  if (type === 'application/x-www-form-urlencoded') return '.txt';
  return '.bin';
}

export async function decodeWebhookBody(received: Received, params: WebhookParameters, limits: WebhookDecodeLimits, services: DecodeServices): Promise<Omit<DecodedItem, 'sourceIndex'>> {
  const media = parseMediaType(received.contentType);
  let encoding;
  try { encoding = parseEncoding(received.headers['content-encoding']); } catch (error) { throw new IngressError('unsupported-media', (error as Error).message); }
  // Only bodies that are staged as files need their folder.
  const folder = () => stagingFolder(received.workflowId, received.receivedAt, received.requestId);
  const decodedStream = async (): Promise<Readable> => {
    const raw = await services.openBody(received);
    if (encoding === 'identity') return raw;
    const inflater = createInflater(encoding, { maxBytes: limits.maxInflatedBytes, maxRatio: limits.maxInflationRatio, compressedSize: bodySize(received.body) });
    raw.on('error', (e) => inflater.destroy(e));
    return raw.pipe(inflater);
  };
  const stageWhole = async (name: string): Promise<string> => {
    const path = `${folder()}/${name}`;
    try {
      await services.store.put(path, await decodedStream(), { contentType: media.type ? stagedMediaType(media.type) : undefined });
    } catch (error) {
      throw asInputError(error);
    }
    return path;
  };

  if (params.options.rawBody || params.options.binaryData) {
    const path = await stageWhole(`body${extensionOf(media.type)}`);
    const value = params.options.rawBody ? { file: path } : { [params.options.binaryPropertyName]: path };
    return { value: JSON.stringify(value), files: [path] };
  }

  const kind = bodyKind(media.type);
  if (kind === 'multipart') {
    try {
      const { value, files } = await stageMultipart(await decodedStream(), received.contentType ?? '', limits.multipart, services.store, folder());
      return { value: JSON.stringify(value), files };
    } catch (error) {
      throw asInputError(error);
    }
  }

  let bytes: Buffer;
  try {
    bytes = inflateSync(await services.readBody(received, limits.maxInMemoryBytes), encoding, { maxBytes: limits.maxInMemoryBytes, maxRatio: limits.maxInflationRatio });
  } catch (error) {
    throw asInputError(error);
  }
  return { value: JSON.stringify(decodeInMemory(bytes, kind, media.params.charset, limits.maxFormFields)), files: [] };
}

/**
 * The value of a body the decoder reads whole (JSON and any unrecognised type, form, XML, text), from its
 * inflated bytes. The receiver measures what it decodes to without building it (decoded-size.ts). A body that
 * cannot be read as its type is an IngressError.
 */
export function decodeInMemory(bytes: Buffer, kind: BodyKind, charset: string | undefined, maxFormFields = DEFAULT_FORM_MAX_FIELDS): unknown {
  try {
    switch (kind) {
      case 'form': return parseForm(bytes, charset, maxFormFields);
      case 'xml': return decodeText(bytes, charset);
      case 'text': return { text: decodeText(bytes, charset) };
      default: {
        const json = withoutUtf8Bom(bytes, charset);
        return json.length === 0 ? {} : parseJson(decodeText(json, charset));
      }
    }
  } catch (error) {
    if (error instanceof IngressError) throw error;
    // Not the parser's message: V8 quotes a piece of the body, which must not reach dead letters or logs.
    const position = /at position (\d+)/.exec((error as Error).message)?.[1];
    throw new IngressError('payload-parse-error', `the ${kind === 'json' ? 'JSON' : kind} body could not be read${position ? ` (at byte ${position})` : ''}`);
  }
}

/**
 * A body too large for the receiver's check may nest deeper than anything after this can take. Numbers a double
 * would change (past 2^53, past its range) are kept as written (json-numbers.ts).
 */
function parseJson(text: string): unknown {
  if (jsonNestsDeeperThan(text)) throw new IngressError('payload-parse-error', `the body is ${TOO_DEEP}`);
  return parseKeepingNumbers(text);
}

/**
 * Faults of the body itself are permanent (dead letter); anything else (store down) is retried. A store's
 * write fails with the body's own fault as its cause when the stream it was given failed (a corrupt gzip body
 * staged as a file): that is the body's fault too, not an outage to wait out.
 */
function asInputError(error: unknown): unknown {
  if (error instanceof ObjectStoreError && (error.cause instanceof EncodingError || error.cause instanceof MultipartError)) return asInputError(error.cause);
  if (error instanceof EncodingError) return new IngressError(error.kind === 'too-large' ? 'payload-too-large' : error.kind === 'unsupported' ? 'unsupported-media' : 'payload-parse-error', error.message, { cause: error });
  if (error instanceof MultipartError) return new IngressError(error.kind === 'too-large' ? 'payload-too-large' : 'payload-parse-error', error.message, { cause: error });
  const code = (error as { code?: string }).code;
  if (code === 'too-large') return new IngressError('payload-too-large', (error as Error).message, { cause: error });
  return error;
}

