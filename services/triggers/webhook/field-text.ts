import { asciiIncompatibleCharset } from './media-type';
import { encodingOf, readText } from './text-charset';

/**
 * The charset busboy (patched) reports for a part whose Content-Type names none (passed as its `defCharset`): upper
 * case, which a charset from a header never is (busboy lower-cases those), so a part that names `utf-8` is told apart
 * from one that names nothing.
 */
export const NO_CHARSET = 'NONE';

/** RFC 7578 §4.6 (and HTML's form submission): the field whose value is the charset of the form's other fields. */
const CHARSET_FIELD = '_charset_';

const KNOWN = 'one the WHATWG Encoding standard names: UTF-8, ISO-8859-x, Windows-125x, UTF-16LE/BE, …';

/** Waiting for the form's charset: every text field that names none is read in it (below). */
export const LATER = Symbol('later');

/** Why a field has no text; `tooLarge` when it is a limit that refused it, not its bytes. */
export type FieldProblem = { detail: string; tooLarge?: true };

/**
 * The text of a form's text fields, each from its bytes (transfer encoding undone) in its part's charset, or, when
 * the part names none, in the form's: the value of its `_charset_` field (the first, RFC 7578 §4.6), else UTF-8
 * (§5.1.2). A browser sends `_charset_` wherever the hidden input sits, and it holds for the whole form, fields
 * before it too; so a field that names no charset waits until `_charset_` comes or the form ends, and is read then
 * (`done`). The `_charset_` field itself is read in its own part's charset, else UTF-8, and kept as sent.
 *
 * What waits is held, and the fields of a form without `_charset_` all wait to its end; so what is held is bounded
 * by `maxWaitingBytes` (a field's limit: before waiting, the scan held at most one field). Past it the waiting
 * fields are read as UTF-8 at once, which they are unless a `_charset_` still comes; one that then names another
 * charset, or waiting fields that are not UTF-8, are refused as too large to wait rather than read in a charset the
 * form does not have.
 *
 * Both the receiver's scan and the decoder read fields through this, so they agree on every value. What cannot be
 * read is a `{ detail }` in words of our own: read as U+FFFD or dropped, the workflow would get a value the partner
 * never sent, and a field that is no text in any charset belongs in a file part.
 */
export function fieldTexts(maxWaitingBytes: number) {
  let formCharset: string | undefined;
  let waiting: Array<{ bytes: Buffer; done: (text: string) => void }> = [];
  let waitingBytes = 0;
  /** The waiting fields went over maxWaitingBytes and were read as UTF-8 before any `_charset_` came. */
  let readEarly = false;
  const waitedTooLong: FieldProblem = {
    detail: `text fields that name no charset, waiting for its _charset_ field, of more than ${maxWaitingBytes} bytes together: send _charset_ before them, or name the charset in each part's Content-Type`,
    tooLarge: true,
  };

  const read = (bytes: Buffer, charset: string): string | FieldProblem => {
    const text = readText(charset, bytes);
    if ('text' in text) return text.text;
    if (text.problem === 'unknown-charset') return { detail: `a text field is in a charset this service cannot decode (${KNOWN})` };
    if (text.problem === 'binary-charset') return { detail: 'a text field names x-user-defined as its charset, a pass-through for binary bytes rather than text: send such bytes as a file' };
    if (text.problem === 'no-byte-order') return { detail: 'a text field in utf-16 without a byte order mark: name utf-16le or utf-16be, or send a byte order mark' };
    return { detail: "a text field's bytes are not valid in its charset (the form's _charset_, else UTF-8, when its Content-Type names none; send such bytes as a file)" };
  };

  const readWaiting = (charset: string): FieldProblem | null => {
    const pending = waiting;
    waiting = [];
    waitingBytes = 0;
    for (const field of pending) {
      const text = read(field.bytes, charset);
      if (typeof text !== 'string') return text;
      field.done(text);
    }
    return null;
  };

  /** Why the form's `_charset_` cannot be its charset, or null. */
  const formCharsetProblem = (label: string): FieldProblem | null => {
    const usable = readText(label, Buffer.alloc(0));
    if ('problem' in usable && usable.problem === 'unknown-charset') return { detail: `the form's _charset_ field names a charset this service cannot decode (${KNOWN})` };
    if ('problem' in usable && usable.problem === 'binary-charset') return { detail: "the form's _charset_ field names x-user-defined, a pass-through for binary bytes rather than a charset" };
    // HTML never sends a form in UTF-16 (it sends UTF-8 from such a page); read in it, every field that names no
    // charset, ASCII ones too, would come out as other characters, accepted.
    const wide = asciiIncompatibleCharset(label);
    if (wide) return { detail: `the form's _charset_ field names ${wide}, which would read every field that names no charset, ASCII ones too, as other characters (a browser never sends a form in it): name the charset in the Content-Type of each part sent in it` };
    if (readEarly && encodingOf(label) !== 'utf-8') return waitedTooLong;
    return null;
  };

  return {
    /** The field's text, LATER (then `done` hears it) when it waits for the form's charset, or why it has none. */
    add(name: string, bytes: Buffer, charset: string, done: (text: string) => void): string | typeof LATER | FieldProblem {
      const isCharsetField = name.toLowerCase() === CHARSET_FIELD;
      if (charset === NO_CHARSET && !isCharsetField && formCharset === undefined && !readEarly) {
        waiting.push({ bytes, done });
        waitingBytes += bytes.length;
        if (waitingBytes <= maxWaitingBytes) return LATER;
        readEarly = true;
        // `done` has heard this field too.
        return readWaiting('utf-8') ? waitedTooLong : LATER;
      }
      const text = read(bytes, charset === NO_CHARSET ? (isCharsetField ? 'utf-8' : formCharset ?? 'utf-8') : charset);
      if (typeof text !== 'string' || !isCharsetField || formCharset !== undefined) return text;
      const label = text.trim();
      const problem = formCharsetProblem(label);
      if (problem) return problem;
      formCharset = label;
      return readWaiting(label) ?? text;
    },
    /** The form is over: fields still waiting are read as UTF-8. */
    end: (): FieldProblem | null => readWaiting('utf-8'),
    /** The form failed or was given up: what waits is let go. */
    clear() { waiting = []; waitingBytes = 0; },
  };
}
