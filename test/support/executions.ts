import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { ExecutionRequested } from '../../services/platform/avro/records';
import { collectUntilQuiet } from './log-reads';
import type { TestApp } from './app';

const codec = defaultAvroCodec();

/** Every execution requested so far, in log order. */
export async function allExecutions(app: TestApp): Promise<ExecutionRequested[]> {
  return (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value));
}

/**
 * Wait until a request has become exactly `count` executions (never more), and return them with their
 * inputs parsed. To show that a request started nothing, send a request to the same workflow after it
 * (same key under the default RECORD_KEY=workflow, so it is processed after it) and wait for that one; with
 * RECORD_KEY=request the two are not ordered, and this proves nothing.
 */
export async function executionsOf(app: TestApp, requestId: string | null, count: number, timeoutMs = 20_000): Promise<{ execution: ExecutionRequested; input: Record<string, any> }[]> {
  if (!requestId) throw new Error('the answer carried no x-request-id');
  const deadline = Date.now() + timeoutMs;
  let found: ExecutionRequested[] = [];
  while (Date.now() < deadline) {
    found = (await allExecutions(app)).filter((e) => e.requestId === requestId);
    if (found.length > count) throw new Error(`request ${requestId} became ${found.length} executions, expected ${count}`);
    if (found.length === count) return found.map((execution) => ({ execution, input: JSON.parse(execution.input) }));
  }
  throw new Error(`request ${requestId} became ${found.length} executions within ${timeoutMs} ms, expected ${count}`);
}

/** The dead letter a request's received record became, waiting for it. */
export async function deadLetterOf(app: TestApp, requestId: string | null, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const letter = (await collectUntilQuiet(app.backends.log, app.topics.deadLetter, 300, 500)).map((r) => codec.decode('DeadLetter', r.value))
      .find((d) => d.source.topic === app.topics.received && codec.decode('Received', d.source.value).requestId === requestId);
    if (letter) return letter;
  }
  throw new Error(`request ${requestId} was not dead-lettered within ${timeoutMs} ms`);
}
