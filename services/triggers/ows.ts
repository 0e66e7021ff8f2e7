/**
 * A header value without the white space HTTP allows around it (OWS: spaces and tabs, RFC 9110 §5.6.3).
 * String.prototype.trim() also takes U+00A0 and other Unicode spaces, which are part of the value as sent:
 * a credential or signature is compared as HTTP delimits it, the same in every scheme.
 */
export function trimOws(value: string): string {
  return value.replace(/^[ \t]+|[ \t]+$/g, '');
}
