/** Small checks the registry's document validators share (workflows, credentials of every type). */

/** An HTTP header name (an RFC 9110 token): what every option or credential field naming a header is checked against. */
export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A JSON object (not null, not an array). */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
