import { decodeText } from './media-type';

/**
 * application/x-www-form-urlencoded → field name → string. A field sent more than once becomes an
 * array of its values in order (rather than keeping only one and losing data). Percent-escapes are
 * bytes in the Content-Type's charset (UTF-8 by default).
 */
export function parseForm(bytes: Buffer, charset: string | undefined): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null);
  const text = bytes.toString('latin1'); // each byte one char: percent-decoding works on bytes
  if (text.length === 0) return {};
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decodeComponent(eq >= 0 ? pair.slice(0, eq) : pair, charset);
    const value = decodeComponent(eq >= 0 ? pair.slice(eq + 1) : '', charset);
    const existing = out[name];
    if (existing === undefined) out[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else out[name] = [existing, value];
  }
  return { ...out };
}

function decodeComponent(raw: string, charset: string | undefined): string {
  const latin1 = raw.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return decodeText(Buffer.from(latin1, 'latin1'), charset);
}
