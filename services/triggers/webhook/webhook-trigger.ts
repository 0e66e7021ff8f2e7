import { Writable } from 'node:stream';
import type { WorkflowNode } from '../../platform/registry/documents';
import { errorAnswer, type Answer } from '../answers';
import type { BodyValidator, InboundRequest, InspectOutcome, ReceivedBody, TriggerPlugin, TriggerServices } from '../trigger';
import { authenticate, signatureCredential } from './authenticate';
import { isBotUserAgent } from '../bot-detector';
import { createInflater, DEFAULT_MAX_INFLATION_RATIO, EncodingError, encodingAnswer, inflateSync, parseEncoding, type Encoding, type InflaterFactory, type InflationBound } from './content-encoding';
import { decodeWebhookBody, type WebhookDecodeLimits } from './decode';
import { DEFAULT_FORM_MAX_FIELDS, formCharsetProblem, formFieldsValidator } from './form';
import { decodedSizeMeter, decodedSizeRefusal, MAX_DECODED_VALUE_BYTES, type Meter } from './decoded-size';
import { bodyKind, decodeText, isKnownCharset, parseMediaType, withoutUtf8Bom, type BodyKind } from './media-type';
import { MultipartError, scanMultipart } from './multipart';
import { onceEither } from './once-either';
import { parameterProblems, webhookParameters, type WebhookParameters } from './parameters';
import { checkJsonText } from './json-syntax';
import { jsonNestsDeeperThan, TOO_DEEP } from '../json-depth';
import { parseKeepingNumbers } from '../json-numbers';
import { acceptedAnswer, responseProblems } from './respond';
import { verifyRsaSha256 } from './signature';
import { createSignedBodies, SIGNED_SCHEMES } from './auth/signed-bodies';
import { DEFAULT_HELD_BODY_BYTES, heldBytes, type HeldBytes } from '../held-bytes';
import { standaloneAdmissionGuards, type AdmissionGuards } from './admission-guards';
import { guardProblems } from './admission-options';
import { idempotencyProblems, needsJsonValue, webhookIdempotency } from './idempotency';

/**
 * The generic webhook trigger, Protocol = HTTP (SPEC §2.1, §2.2, §5). AS2 has its own plugin.
 *
 * Receiver: Ignore Bots before authentication; Basic and Header Auth on headers; while the body
 * streams in, bounded inflation and multipart framing/limits; then an RSA signature over the exact
 * bytes and a JSON syntax check of bodies small enough to hold (which also gives templates `$json`).
 * Decoder: decode.ts.
 */
export interface WebhookLimits extends WebhookDecodeLimits {
  /** JSON bodies up to this size (after inflation) are checked by the receiver; larger ones by the decoder. */
  maxJsonCheckBytes: number;
}

export const DEFAULT_WEBHOOK_LIMITS: WebhookLimits = {
  maxInflatedBytes: 64 * 1024 * 1024,
  maxInflationRatio: DEFAULT_MAX_INFLATION_RATIO,
  // What it decodes to must also fit one record (decoded-size.ts): measured, since JSON's whitespace or a form's
  // percent-escapes can make a larger body decode to less.
  maxInMemoryBytes: 64 * 1024 * 1024,
  maxJsonCheckBytes: 1024 * 1024,
  maxFormFields: DEFAULT_FORM_MAX_FIELDS,
  multipart: { maxFileBytes: 64 * 1024 * 1024, maxFiles: 100, maxFields: 1000, maxFieldBytes: 1024 * 1024, maxValueBytes: MAX_DECODED_VALUE_BYTES },
};

const notJson = (): InspectOutcome => ({ ok: false, answer: errorAnswer('payload-parse-error', 'The request body is not valid JSON') });
const tooDeep = (): InspectOutcome => ({ ok: false, answer: errorAnswer('payload-parse-error', `The request body is ${TOO_DEEP}`) });
const unknownCharset = (): InspectOutcome => ({ ok: false, answer: errorAnswer('payload-parse-error', 'The request body is in a charset this service cannot decode') });

/** Sent as it is; an unsupported coding was refused (415) before any inspection. */
function isIdentity(request: InboundRequest): boolean {
  try { return parseEncoding(request.headers['content-encoding']) === 'identity'; } catch { return false; }
}

const hasTemplates = (params: WebhookParameters) => params.options.responseData !== null || params.options.responseHeaders.length > 0;

function multipartAnswer(error: MultipartError): Answer {
  if (error.kind === 'too-large') return errorAnswer('payload-too-large', `The multipart body has ${error.message}`);
  return errorAnswer('payload-parse-error', `The multipart body is malformed${error.publicDetail ? `: ${error.publicDetail}` : ''}`);
}

/** The kinds whose bytes the receiver checks as they stream in. */
const scannedKind = (kind: BodyKind): 'multipart' | 'form' | null => (kind === 'multipart' || kind === 'form' ? kind : null);

/** A validator that ignores the body and gives one answer at the end. */
function fixedVerdict(answer: Answer): BodyValidator {
  return { write: () => true, once: (_e, l) => l(), end: async () => answer, abort: () => undefined };
}

/** What the inflated bytes are measured by as they stream, and where the measure goes once they all passed. */
interface Metering {
  meter: Meter;
  measured(size: number): void;
}

/**
 * `bound`: the bound the decoder will hold the inflated body to, so nothing accepted here fails there for size.
 * `kind`: what is checked in the inflated bytes: multipart framing and limits, a form's pairs, or nothing more.
 * `metering`: what the inflated body decodes to (decoded-size.ts), measured here so that inspect() need not
 * inflate the body a second time for it.
 */
function streamingValidator(encoding: Encoding, contentType: string | null, kind: 'multipart' | 'form' | null, bound: InflationBound, limits: WebhookLimits, inflate: InflaterFactory, metering: Metering | null): BodyValidator {
  const scan = kind === 'multipart' ? scanMultipart(contentType ?? '', limits.multipart) : null;
  const formFields = kind === 'form' ? formFieldsValidator(limits.maxFormFields) : null;
  const inflater = encoding === 'identity' ? null : inflate(encoding, bound);
  let encodingFailure: EncodingError | null = null;
  const inflated = inflater
    ? new Promise<void>((resolve) => {
        const sink = new Writable({
          write(chunk: Buffer, _e, cb) {
            formFields?.write(chunk);
            // A meter that threw would end the process from inside zlib's callback: inspect() then measures the body itself.
            if (metering) { try { metering.meter.write(chunk); } catch { metering = null; } }
            if (!scan || scan.write(chunk)) cb(); else scan.once('drain', () => cb());
          },
        });
        inflater.on('error', (error) => { encodingFailure = error instanceof EncodingError ? error : new EncodingError(error.message, 'corrupt'); resolve(); });
        sink.on('finish', () => resolve());
        inflater.pipe(sink);
      })
    : Promise.resolve();
  const first = inflater ?? scan!;
  return {
    write: (chunk) => (encodingFailure ? true : first.write(chunk)),
    // An inflater that failed while pushing back (a bomb past the limit) never drains: its end ends the wait.
    once: (event, listener) => {
      if (!inflater) return scan!.once(event, listener);
      if (encodingFailure) return listener();
      onceEither(inflater, event, inflated, listener);
    },
    async end() {
      if (inflater) { inflater.end(); await inflated; }
      if (encodingFailure) { scan?.abort(); return encodingAnswer(encodingFailure); }
      // Only a body inflated whole within its bound is measured: inspect() inflates any other itself.
      if (inflater && metering) metering.measured(metering.meter.end());
      if (formFields) return formFields.end();
      const failure = scan ? await scan.end() : null;
      return failure ? multipartAnswer(failure) : null;
    },
    abort() { inflater?.destroy(); scan?.abort(); },
  };
}

/**
 * `guards`: the allow-list and rate limits (admission-guards.ts), whose buckets the receiver process shares.
 * `held`: the receiver's memory budget for bodies (held-bytes.ts), which a staged body read back to verify a
 * Standard Webhooks `v1a` signature is counted against.
 */
export function createWebhookTrigger(limits: WebhookLimits = DEFAULT_WEBHOOK_LIMITS, guards: AdmissionGuards = standaloneAdmissionGuards(), held: HeldBytes = heldBytes(DEFAULT_HELD_BODY_BYTES), inflate: InflaterFactory = createInflater): TriggerPlugin {
  /** Standard Webhooks and HMAC signatures, computed on the raw bytes as they stream in (auth/signed-bodies.ts). */
  const signed = createSignedBodies(held);
  /**
   * What each compressed body decodes to, measured by its validator as it inflated it (decoded-size.ts): inflating
   * is the costliest part of both checks, so the body is not inflated again to measure it (a JSON body held in
   * memory still is, once, by the syntax check: keeping its inflated bytes while it streams would be memory the
   * body budget does not count). Keyed by the request, which the receiver
   * hands to validator() and inspect() alike.
   */
  const decodedSizes = new WeakMap<InboundRequest, number>();

  /** RSA signature over the exact bytes (SPEC §5): null when it holds, else the refusal. */
  async function verifiedSignature(request: InboundRequest, node: WorkflowNode, body: ReceivedBody, services: TriggerServices): Promise<InspectOutcome | null> {
    // Checked at admission too; looked up again (from the cache) in case it changed while the body arrived.
    const credential = await signatureCredential(request, node, services);
    if (!credential) return { ok: false, answer: errorAnswer('credential-unavailable') };
    const signature = request.headers[credential.header];
    if (signature === undefined) return { ok: false, answer: errorAnswer('authorization-required') };
    if (!verifyRsaSha256(credential.publicKey, signature, body.sha256())) return { ok: false, answer: errorAnswer('authorization-wrong') };
    return null;
  }

  /** JSON syntax of a body small enough to hold, which the 400 answer needs (and `$json` for templates). */
  function syntaxCheck(request: InboundRequest, node: WorkflowNode, params: WebhookParameters, body: ReceivedBody): InspectOutcome {
    if (params.options.rawBody || params.options.binaryData) return { ok: true, inspection: {} };
    const media = parseMediaType(request.headers['content-type']);
    const kind = bodyKind(media.type);
    // A text body in a charset nothing here can decode would only fail in the decoder: say so now.
    if (kind !== 'multipart' && !isKnownCharset(media.params.charset)) return unknownCharset();
    // A form is split on its `&` and `=` bytes before it is decoded: in UTF-16 it would come out garbled, accepted.
    const formProblem = kind === 'form' ? formCharsetProblem(media.params.charset) : null;
    if (formProblem) return { ok: false, answer: errorAnswer('payload-parse-error', formProblem) };
    // The decoder reads these kinds whole. A compressed body was held to that bound as it inflated; one
    // sent as it is (MAX_BODY_BYTES may be higher) is held to it here.
    if (kind !== 'multipart' && body.size > limits.maxInMemoryBytes && isIdentity(request)) {
      return { ok: false, answer: errorAnswer('payload-too-large', `The request body is larger than ${limits.maxInMemoryBytes} bytes, the most this service decodes for this content type`) };
    }
    if (kind !== 'json' || !body.inline) return { ok: true, inspection: {} };
    // The answer must say 400 for a body that is not JSON, so the syntax check of bodies small enough
    // to hold lives here; a larger one is checked by the decoder (and dead-lettered if bad).
    let bytes: Buffer;
    try {
      bytes = withoutUtf8Bom(inflateSync(body.inline, parseEncoding(request.headers['content-encoding']), { maxBytes: limits.maxJsonCheckBytes, maxRatio: limits.maxInflationRatio }), media.params.charset);
    } catch {
      return { ok: true, inspection: {} }; // too large to check here, or already judged by the validator
    }
    if (bytes.length === 0) return { ok: true, inspection: { json: {} } };
    const charset = (media.params.charset ?? 'utf-8').trim().toLowerCase();
    // Only templates and a JSON idempotency key read the value (`$json`); without them UTF-8 is checked without building it.
    if (!hasTemplates(params) && !needsJsonValue(node) && (charset === 'utf-8' || charset === 'utf8')) {
      const verdict = checkJsonText(bytes);
      return verdict === 'json' ? { ok: true, inspection: {} } : verdict === 'too-deep' ? tooDeep() : notJson();
    }
    const text = decodeText(bytes, charset);
    if (jsonNestsDeeperThan(text)) return tooDeep();
    try {
      // As the decoder reads it: an id past 2^53 rounded would make two orders one idempotency key.
      return { ok: true, inspection: { json: parseKeepingNumbers(text) } };
    } catch {
      return notJson();
    }
  }

  /** The syntax check, then what the body decodes to must fit a record (decoded-size.ts). */
  function checkedBody(request: InboundRequest, node: WorkflowNode, params: WebhookParameters, body: ReceivedBody, services: TriggerServices): InspectOutcome | Promise<InspectOutcome> {
    const syntax = syntaxCheck(request, node, params, body);
    if (!syntax.ok) return syntax;
    const refusal = decodedSizeRefusal(request, params, body, services, { maxBytes: limits.maxInMemoryBytes, maxRatio: limits.maxInflationRatio }, decodedSizes.get(request), inflate);
    if (refusal instanceof Promise) return refusal.then((r) => r ?? syntax);
    return refusal ?? syntax;
  }

  /** Whether bodyValidator would make a validator: the body is compressed (or names a coding), multipart or a form. */
  function hasStreamingChecks(request: InboundRequest, node: WorkflowNode): boolean {
    const coding = request.headers['content-encoding'];
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') return true;
    const params = webhookParameters(node);
    return !(params.options.rawBody || params.options.binaryData) && scannedKind(bodyKind(parseMediaType(request.headers['content-type']).type)) !== null;
  }

  /**
   * Inflation, multipart framing and a form's pairs, checked while the body streams in; null when there is nothing
   * to check. `compressedSize`: the whole body's size, when it is all at hand (a signed body read again once its
   * signature holds).
   */
  function bodyValidator(request: InboundRequest, node: WorkflowNode, compressedSize?: number): BodyValidator | null {
    const params = webhookParameters(node);
    let encoding: Encoding;
    try { encoding = parseEncoding(request.headers['content-encoding']); } catch (error) { return fixedVerdict(encodingAnswer(error as EncodingError)); }
    const asFile = params.options.rawBody || params.options.binaryData;
    const kind = asFile ? null : scannedKind(bodyKind(parseMediaType(request.headers['content-type']).type));
    // A form's pairs are counted as it arrives: the decoder refuses more than maxFormFields.
    if (encoding === 'identity' && kind !== 'multipart') return kind === 'form' ? formFieldsValidator(limits.maxFormFields) : null;
    // Files and multipart stream through the decoder; every other kind is decoded in memory.
    const maxBytes = asFile || kind === 'multipart' ? limits.maxInflatedBytes : limits.maxInMemoryBytes;
    // While it arrives, the ratio is of the compressed bytes read so far, never of a declared Content-Length: a client
    // may declare 64 MiB, send 261 KB and stall, and the ratio would then let 256 MiB be inflated (found by review).
    // What it decodes to is measured as it inflates: the same bound as decoded-size.ts's (maxInMemoryBytes), its ratio
    // of the bytes so far never laxer than that of the whole size there.
    const meter = encoding === 'identity' ? null : decodedSizeMeter(request, params);
    const metering = meter && { meter, measured: (size: number) => { decodedSizes.set(request, size); } };
    return streamingValidator(encoding, request.headers['content-type'] ?? null, kind, { maxBytes, maxRatio: limits.maxInflationRatio, compressedSize }, limits, inflate, metering);
  }

  /**
   * The same checks for a signed body, once its signature holds: the bytes held in memory, or a staged body
   * read back from the store (only signed bodies that are compressed, multipart or forms pay for that read).
   */
  async function checkedAfterSignature(request: InboundRequest, node: WorkflowNode, body: ReceivedBody, services: TriggerServices): Promise<InspectOutcome | null> {
    const validator = bodyValidator(request, node, body.size);
    if (!validator) return null;
    if (body.inline) {
      validator.write(body.inline);
    } else {
      try {
        for await (const chunk of await body.readStaged!()) {
          if (!validator.write(chunk as Buffer)) await new Promise<void>((resolve) => validator.once('drain', resolve));
        }
      } catch (error) {
        // Accepted unchecked, as before this check existed: the decoder checks it again and dead-letters it if bad.
        validator.abort();
        services.logger.warn('a staged signed body could not be read back for its checks', { requestId: request.requestId, error });
        return null;
      }
    }
    const verdict = await validator.end();
    return verdict ? { ok: false, answer: verdict } : null;
  }

  return {
    nodeTypes: ['webhook'],

    kindOf: (node) => (webhookParameters(node).protocol === 'as2' ? 'as2' : 'webhook'),

    admit: (request, node, services) => guards.admit(request, node, () => {
      const params = webhookParameters(node);
      if (params.options.ignoreBots && isBotUserAgent(request.headers['user-agent'])) return { ok: false, answer: errorAnswer('bot-rejected') };
      return authenticate(request, node, params, services, signed);
    }),

    validator(request, node) {
      // A signed body is not inflated or parsed before its signature holds (DESIGN.md §6): inspect() does it.
      const { authentication } = webhookParameters(node);
      if (authentication === 'rsaSignature') return null;
      // Standard Webhooks and HMAC: the validator only computes the MACs; the checks follow in inspect().
      if (SIGNED_SCHEMES.has(authentication)) return signed.validator(request);
      return bodyValidator(request, node);
    },

    inspect(request, node, body, services) {
      const params = webhookParameters(node);
      if (params.authentication === 'rsaSignature') {
        return verifiedSignature(request, node, body, services).then(async (refusal) => refusal ?? (await checkedAfterSignature(request, node, body, services)) ?? checkedBody(request, node, params, body, services));
      }
      if (SIGNED_SCHEMES.has(params.authentication)) {
        const verdict = signed.verified(request, body, services);
        const after = (refusal: InspectOutcome | null): InspectOutcome | Promise<InspectOutcome> => {
          if (refusal) return refusal;
          // A body sent as it is and not multipart has nothing to check while streaming: no promise.
          if (!hasStreamingChecks(request, node)) return checkedBody(request, node, params, body, services);
          return checkedAfterSignature(request, node, body, services).then((failed) => failed ?? checkedBody(request, node, params, body, services));
        };
        return verdict instanceof Promise ? verdict.then(after) : after(verdict);
      }
      return checkedBody(request, node, params, body, services);
    },

    idempotency: webhookIdempotency,

    accepted: (request, node, _body, inspection, services) => acceptedAnswer(webhookParameters(node), request, inspection, services.logger),

    // One item per request, multipart files and all: its source is the request itself (0).
    decode: async (received, node, services) => [{ ...await decodeWebhookBody(received, webhookParameters(node), limits, services), sourceIndex: 0 }],

    validateNode(node: WorkflowNode) {
      const at = `node "${node.name}"`;
      const params = webhookParameters(node);
      return [...parameterProblems(node, at), ...guardProblems(node, at), ...responseProblems(params, at), ...idempotencyProblems(node, at)];
    },
  };
}
