import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { context, trace } from '@opentelemetry/api';
import { contextFromHeaders, inConsumerSpan, inConsumerSpanSync, spanTraceHeaders, traceHeaders } from '../../services/platform/telemetry/trace-context';

/**
 * Without an SDK (none registered here), the stages' spans take a fast path past the API's contexts
 * (trace-context.ts, carriedSpan). What a stage writes must be what the propagator writes for the record's headers.
 */
const ID = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';
const CASES: Record<string, string>[] = [
  {},
  { traceparent: `00-${ID}-${SPAN}-01` },
  { traceparent: `00-${ID}-${SPAN}-00` },
  { traceparent: `00-${ID}-${SPAN}-03` },
  { traceparent: `00-${ID}-${SPAN}-ff` },
  { traceparent: `00-${ID.toUpperCase()}-${SPAN}-01` },
  { traceparent: `01-${ID}-${SPAN}-01-later-fields` },
  { traceparent: `ff-${ID}-${SPAN}-01` },
  { traceparent: `00-${'0'.repeat(32)}-${SPAN}-01` },
  { traceparent: `00-${ID}-${'0'.repeat(16)}-01` },
  { traceparent: ` 00-${ID}-${SPAN}-01 ` },
  { traceparent: `00-${ID}-${SPAN}-01`, tracestate: 'vendor=abc,other=x' },
  { traceparent: `00-${ID}-${SPAN}-01`, tracestate: '!!not a state' },
  { traceparent: `00-${ID}-${SPAN}` },
  { traceparent: '' },
  { tracestate: 'vendor=abc' },
];

test('without an SDK, a stage writes the trace headers the propagator writes for its record, whatever they hold', async () => {
  for (const headers of CASES) {
    const expected = traceHeaders(contextFromHeaders(headers));
    expect({ headers, out: inConsumerSpanSync('stage', headers, {}, (span) => spanTraceHeaders(span)) }).toEqual({ headers, out: expected });
    expect({ headers, out: await inConsumerSpan('stage', headers, {}, async (span) => spanTraceHeaders(span)) }).toEqual({ headers, out: expected });
  }
  // The cases the fast path takes do carry the trace on.
  expect(inConsumerSpanSync('stage', CASES[1], {}, (span) => spanTraceHeaders(span))).toEqual({ traceparent: `00-${ID}-${SPAN}-01` });
});

test('a handler that throws fails the stage span as before: the error comes back unchanged', async () => {
  const error = new Error('boom');
  expect(() => inConsumerSpanSync('stage', CASES[1], {}, () => { throw error; })).toThrow(error);
  await expect(inConsumerSpan('stage', CASES[1], {}, async () => { throw error; })).rejects.toBe(error);
});

test('an SDK started for metrics only (a context manager, no tracer provider): the record\'s span stays the active one in the handler, for log lines and outgoing calls', async () => {
  const manager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(manager);
  try {
    const headers = CASES[1];
    const sync = inConsumerSpanSync('stage', headers, {}, () => trace.getActiveSpan()?.spanContext().spanId);
    const later = await inConsumerSpan('stage', headers, {}, async () => { await new Promise((resolve) => setImmediate(resolve)); return trace.getActiveSpan()?.spanContext().spanId; });
    expect({ sync, later }).toEqual({ sync: SPAN, later: SPAN });
    expect(inConsumerSpanSync('stage', headers, {}, (span) => spanTraceHeaders(span))).toEqual({ traceparent: `00-${ID}-${SPAN}-01` });
  } finally {
    context.disable();
  }
});
