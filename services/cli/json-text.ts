import { TOO_DEEP } from '../triggers/json-depth';
import { checkJsonText } from '../triggers/webhook/json-syntax';
import { UsageError } from './args';

/**
 * A document file's JSON (`ingress workflows|credentials put FILE`). What is wrong with it is said by line and
 * column only: V8's JSON.parse message quotes the text around the fault, and a credential's text around a typo
 * is its secret (`"password":TOPSECRET…`). Nesting is bounded as for a webhook body (json-depth.ts): deeper
 * documents overflow the stack of whatever reads them next.
 */
export function parseJsonText(text: string, source: string): unknown {
  const bytes = Buffer.from(text, 'utf8');
  const fault = { at: 0 };
  const verdict = checkJsonText(bytes, fault);
  if (verdict === 'too-deep') throw new UsageError(`${source} holds ${TOO_DEEP} (at ${place(bytes, fault.at)})`);
  if (verdict === 'not-json') {
    throw new UsageError(`${source} is not valid JSON: ${fault.at >= bytes.length ? 'it ends early' : `a syntax error at ${place(bytes, fault.at)}`}`);
  }
  try { return JSON.parse(text); } catch {
    // The check above agrees with JSON.parse (test/unit/json-syntax.test.ts); should they ever differ, still no quote.
    throw new UsageError(`${source} is not valid JSON`);
  }
}

/** `line L, column C` of a byte offset, both from 1, the column in characters. */
function place(bytes: Buffer, at: number): string {
  const lineStart = at === 0 ? 0 : bytes.lastIndexOf(0x0a, at - 1) + 1;
  let line = 1;
  for (let i = bytes.indexOf(0x0a); i !== -1 && i < lineStart; i = bytes.indexOf(0x0a, i + 1)) line++;
  return `line ${line}, column ${bytes.subarray(lineStart, at).toString('utf8').length + 1}`;
}
