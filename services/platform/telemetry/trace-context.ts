import { context, createContextKey, type SpanContext, INVALID_SPAN_CONTEXT, isSpanContextValid, propagation, ProxyTracerProvider, ROOT_CONTEXT, trace, type Context, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { suppressTracing, W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * Trace context across the log: the receiver's span context travels in each record's headers
 * (`traceparent`, `tracestate`), on Kafka and on the embedded log alike, and each stage continues the
 * trace from there. The W3C propagator is used directly so this works whether or not an SDK is running.
 */
const w3c = new W3CTraceContextPropagator();
const setter = { set: (carrier: Record<string, string>, key: string, value: string) => { carrier[key] = value; } };
const getter = {
  get: (carrier: Record<string, string>, key: string) => carrier[key],
  keys: (carrier: Record<string, string>) => Object.keys(carrier),
};

// One tracer for the process: the API hands back a proxy that follows whatever SDK registers later,
// and asking for it per request would allocate a new proxy each time.
const processTracer = trace.getTracer('inbound-event-ingress');
export const tracer = () => processTracer;

/**
 * Whether no SDK runs (no OTEL_* variables: sdk.ts): no tracer provider and no context manager. Then every span is
 * a non-recording one that only holds a span context, and nothing reads the active context. Building contexts to
 * carry it, as the API does, was most of what the stages' spans cost (about a fifth of their CPU per record,
 * docs/benchmarks.md), so they skip it then: `inConsumerSpan` hands the handler a span wrapping the record's own
 * span context, and `spanTraceHeaders` writes it straight back, the same text the propagator would write (a unit
 * test compares them on every kind of header).
 */
const NO_SDK = new ProxyTracerProvider().getDelegate();
/**
 * An SDK started for metrics alone (OTEL_TRACES_EXPORTER=none) registers a context manager and no tracer provider:
 * the API's span must then stay the active context's, for the logger's trace ids and outgoing HTTP instrumentation.
 * A context the no-op manager does not make active tells it apart.
 */
const PROBE = ROOT_CONTEXT.setValue(createContextKey('ingress.context-probe'), true);
function tracingOff(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider && provider.getDelegate() === NO_SDK && context.with(PROBE, () => context.active() !== PROBE);
}

/**
 * A `traceparent` the fast path takes as it is: version 00 in lower-case hex, sampled or not, nonzero ids. Anything
 * else (another version or flag, upper case, a `tracestate` beside it) goes through the propagator, whose parse
 * and rewrite of it the fast path would otherwise have to copy.
 */
const PLAIN_TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0([01])$/;

/** Without an SDK: the span the API would give a stage for these headers, or undefined where only the API can tell. */
function carriedSpan(headers: Record<string, string>): Span | undefined {
  if (headers.tracestate !== undefined) return undefined;
  const traceparent = headers.traceparent;
  if (traceparent === undefined) return NO_PARENT;
  const match = PLAIN_TRACEPARENT.exec(traceparent);
  if (!match || match[1] === INVALID_SPAN_CONTEXT.traceId || match[2] === INVALID_SPAN_CONTEXT.spanId) return undefined;
  return trace.wrapSpanContext({ traceId: match[1], spanId: match[2], traceFlags: Number(match[3]), isRemote: true });
}
/** The API's span for a record without a trace: it holds the invalid span context, and does nothing. */
const NO_PARENT = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export function traceHeaders(ctx: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  w3c.inject(ctx, carrier, setter);
  return carrier;
}

/**
 * The trace headers of what a stage writes while processing a record: those of its span, named explicitly. The
 * active context holds that span only when an SDK has registered a context manager; without one (a stage process
 * started with no OTEL_* variables) it is the root, and the request's trace would end at this stage. Without an
 * SDK the API's span is a non-recording one holding the record's span context, so the output then carries the
 * input's trace context unchanged, as a W3C intermediary that does not trace passes it on.
 */
export function spanTraceHeaders(span: Span): Record<string, string> {
  const spanContext = span.spanContext();
  if (!isSpanContextValid(spanContext)) return {};
  // Without a context manager nothing can suppress tracing, and a fast-path span has no trace state (carriedSpan).
  if (tracingOff() && spanContext.traceState === undefined && (spanContext.traceFlags === 0 || spanContext.traceFlags === 1)) {
    return { traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-0${spanContext.traceFlags}` };
  }
  return traceHeaders(trace.setSpan(context.active(), span));
}

export function contextFromHeaders(headers: Record<string, string>): Context {
  return w3c.extract(context.active(), headers, getter);
}

/** OpenTelemetry messaging attributes of a stage processing a record (semantic conventions). */
export function stageSpanAttributes(logKind: 'kafka' | 'embedded', topic: string, group: string): Record<string, string> {
  return {
    'messaging.system': logKind === 'kafka' ? 'kafka' : 'ingress-embedded',
    'messaging.operation.type': 'process',
    'messaging.destination.name': topic,
    'messaging.consumer.group.name': group,
  };
}

/** Run `fn` inside a consumer span that continues the trace carried by a record. */
export async function inConsumerSpan<T>(
  name: string,
  headers: Record<string, string>,
  attributes: Record<string, string | number>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const carried = tracingOff() ? carriedSpan(headers) : undefined;
  if (carried) return fn(carried);
  const parent = contextFromHeaders(headers);
  return tracer().startActiveSpan(name, { kind: SpanKind.CONSUMER, attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      failed(span, error, headers);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * The span each failure was thrown out of, by the record's trace context, for the lines that tell of it once that
 * span has ended (failureTraceFields). By record too, since one error object can be thrown out of several records'
 * spans at once (a registry look-up's rejection, shared by the requests waiting on it).
 */
const failedIn = new WeakMap<object, Map<string, SpanContext>>();

function failed(span: Span, error: unknown, headers?: Record<string, string>): void {
  // A record without a trace context of its own cannot be told from another: its failure lines name none.
  if (headers?.traceparent && error !== null && typeof error === 'object') {
    let spans = failedIn.get(error);
    if (!spans) failedIn.set(error, spans = new Map());
    spans.set(headers.traceparent, span.spanContext());
  }
  span.recordException(error as Error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
}

/** `inConsumerSpan` for work that does not wait: a stage's batch loop runs it with no promise per record. */
export function inConsumerSpanSync<T>(name: string, headers: Record<string, string>, attributes: Record<string, string | number>, fn: (span: Span) => T): T {
  const carried = tracingOff() ? carriedSpan(headers) : undefined;
  if (carried) return fn(carried);
  const parent = contextFromHeaders(headers);
  return tracer().startActiveSpan(name, { kind: SpanKind.CONSUMER, attributes }, parent, (span) => {
    try {
      return fn(span);
    } catch (error) {
      failed(span, error, headers);
      throw error;
    } finally {
      span.end();
    }
  });
}

/**
 * Run `fn`, a call to a server that is not ours (a partner's asynchronous MDN URL), inside a CLIENT span of its
 * own, with propagation suppressed: the partner gets no `traceparent`, `tracestate` or baggage of ours (they would
 * tell it our trace ids and sampling, and let it join our traces), and the http instrumentation, when it patched
 * the module, makes neither a span nor headers for it. The span is ours, so it is there on every backend.
 */
export async function inUnpropagatedClientSpan<T>(name: string, attributes: Record<string, string | number>, fn: (span: Span) => Promise<T>): Promise<T> {
  const span = tracer().startSpan(name, { kind: SpanKind.CLIENT, attributes }, context.active());
  try {
    return await context.with(suppressTracing(trace.setSpan(context.active(), span)), () => fn(span));
  } catch (error) {
    failed(span, error);
    throw error;
  } finally {
    span.end();
  }
}

/**
 * The trace and span ids for a log line about a record's failed handling written after its span ended (a retry,
 * a dead letter), as the logger writes them for a line inside it: the span `error` was thrown out of, or else (no
 * SDK: the stage's span is the record's own span context) the record's trace context. None when neither is valid.
 */
export function failureTraceFields(error: unknown, headers: Record<string, string> | undefined): { trace_id?: string; span_id?: string } {
  const spanContext = (error !== null && typeof error === 'object' ? failedIn.get(error)?.get(headers?.traceparent ?? '') : undefined) ?? (headers && trace.getSpanContext(contextFromHeaders(headers)));
  return spanContext && isSpanContextValid(spanContext) ? { trace_id: spanContext.traceId, span_id: spanContext.spanId } : {};
}

export { propagation };
