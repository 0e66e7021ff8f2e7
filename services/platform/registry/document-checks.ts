/** Small checks the registry's document validators share (workflows, credentials of every type). */

/** An HTTP header name (an RFC 9110 token): what every option or credential field naming a header is checked against. */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * A header value a request carries as it is: visible ASCII, with spaces and tabs inside only (the HTTP parser
 * strips them around a value; other characters arrive in whatever encoding the client chose).
 */
export const SENDABLE_HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?$/;

/** A JSON object (not null, not an array). */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
