/**
 * What an SDK's error may say in our logs and errors. Cloud SDK errors carry the whole request (URL,
 * headers, SAS tokens, diagnostics) and multi-line dumps, none of which belongs in a log line.
 */

/** The first line of an error's message, at most 300 characters. */
export function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0].slice(0, 300);
}

/**
 * A stand-in for an SDK error, to be kept as a cause: its name, its first line and the named fields that
 * are numbers or strings, strings redacted. Nothing else of the original comes along.
 */
export function sanitizedCause(error: unknown, redact: (text: string) => string, fields: readonly string[]): Error {
  const original = (error ?? {}) as Record<string, unknown>;
  const cause = new Error(redact(firstLine(error))) as Error & Record<string, unknown>;
  if (typeof original.name === 'string') cause.name = original.name;
  for (const field of fields) {
    const value = original[field];
    if (typeof value === 'number') cause[field] = value;
    else if (typeof value === 'string') cause[field] = redact(value);
  }
  cause.stack = `${cause.name}: ${cause.message}`;
  return cause;
}
