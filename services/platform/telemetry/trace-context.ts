import { context, propagation, trace, type Context, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

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
  const parent = contextFromHeaders(headers);
  return tracer().startActiveSpan(name, { kind: SpanKind.CONSUMER, attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

function failed(span: Span, error: unknown): void {
  span.recordException(error as Error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
}

/** `inConsumerSpan` for work that does not wait: a stage's batch loop runs it with no promise per record. */
export function inConsumerSpanSync<T>(name: string, headers: Record<string, string>, attributes: Record<string, string | number>, fn: (span: Span) => T): T {
  const parent = contextFromHeaders(headers);
  return tracer().startActiveSpan(name, { kind: SpanKind.CONSUMER, attributes }, parent, (span) => {
    try {
      return fn(span);
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

export { propagation };
