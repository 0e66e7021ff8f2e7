/**
 * JSON numbers kept as the partner wrote them. JSON.parse reads every number as a double, so a value that
 * round-trips through it can change without a word: `123456789012345678901234567890` comes back as
 * `1.2345678901234568e+29`, `9007199254740993` as `9007199254740992`, `1e400` as Infinity (which
 * JSON.stringify writes as `null`). An order id past 2^53 would reach the workflow as another order's.
 *
 * parseKeepingNumbers gives such a number as JSON.rawJSON of its source text, which JSON.stringify writes back
 * verbatim: the decoded JSON text says what the body said, and each reader decides what to make of it (a
 * double, a BigInt, a decimal). Every other number is the double JSON.parse makes, written back as before.
 */

/** JSON.parse with the source text of each primitive given to the reviver (Node 22+; TypeScript's lib lacks it). */
type ReviverWithSource = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;
const parseWithSource = JSON.parse as (text: string, reviver: ReviverWithSource) => unknown;
const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;

/**
 * Whether a value is a number parseKeepingNumbers kept as written. It is an object with an own `rawJSON`
 * property, so a reader that walks paths must stop at it as at any number, or `id.rawJSON` finds the digits.
 */
export const isRawJson = (JSON as unknown as { isRawJSON(value: unknown): value is { readonly rawJSON: string } }).isRawJSON;

/**
 * A number token (after `[`, `:`, `,` or at the start) that a double may not hold: 16 or more digits (any decimal
 * of 15 significant digits or fewer round-trips), or an exponent (which can leave a double's range). A string that
 * happens to contain `,12345678901234567` only costs the slower parse.
 *
 * Two patterns rather than one `(?:^|[[:,])…`: a pattern that begins with a character class lets the engine skip to
 * the next `[`, `:` or `,`, where the `^|` alternative made it try every character (a 1 KiB body of text: 0.4 µs
 * instead of 1.0, `npm run bench:json-numbers`). Not a lookbehind for what comes before the digits either, though that is
 * faster still on Node 24: Node 22's engine runs a lookbehind at every position, back over any whitespace before
 * it, so a body of spaces would take time quadratic in its length. Both patterns here are linear.
 */
const MAY_CHANGE_AFTER = /[[:,][ \t\r\n]*-?[0-9](?:[0-9.]{15}|[0-9.]*[eE])/;
const MAY_CHANGE_FIRST = /^[ \t\r\n]*-?[0-9](?:[0-9.]{15}|[0-9.]*[eE])/;

/**
 * JSON.parse, with the numbers a double would change kept as written (above). The reviver costs about three
 * times the plain parse, so only a text with such a number token pays it.
 */
export function parseKeepingNumbers(text: string): unknown {
  if (!MAY_CHANGE_AFTER.test(text) && !MAY_CHANGE_FIRST.test(text)) return JSON.parse(text);
  return parseWithSource(text, (_key, value, context) => {
    if (typeof value !== 'number' || context?.source === undefined) return value;
    return changes(context.source, value) ? rawJSON(context.source) : value;
  });
}

/** What JSON.stringify writes, after parseKeepingNumbers, for a number token written `source`. */
export function numberWrittenAs(source: string): string {
  const value = Number(source);
  return changes(source, value) ? source : JSON.stringify(value);
}

const changes = (source: string, value: number) => decimalOf(source) !== decimalOf(String(value));

const NUMBER = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * The decimal a number's text denotes, in one spelling: `1.50e2`, `150` and `150.0` are all `15e3` (digits
 * without leading or trailing zeros, and where the point goes). A double's own text (String(value)) denotes the
 * same decimal as the source exactly when JSON.stringify would write what the partner meant; Infinity has none.
 */
function decimalOf(text: string): string | null {
  const match = NUMBER.exec(text);
  if (!match) return null;
  const [, sign, whole, fraction = '', exponent = '0'] = match;
  let digits = whole + fraction;
  let point = whole.length + Number(exponent);
  const leading = digits.length - digits.replace(/^0+/, '').length;
  digits = digits.slice(leading).replace(/0+$/, '');
  point -= leading;
  return digits === '' ? '0' : `${sign}${digits}e${point}`;
}
