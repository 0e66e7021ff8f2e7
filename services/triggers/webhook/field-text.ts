import { readText } from './text-charset';

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

/**
 * The text of a form's text fields, each from its bytes (transfer encoding undone) in its part's charset, or, when
 * the part names none, in the form's: the value of its `_charset_` field (the first, RFC 7578 §4.6), else UTF-8
 * (§5.1.2). A browser sends `_charset_` wherever the hidden input sits, and it holds for the whole form, fields
 * before it too; so a field that names no charset waits until `_charset_` comes or the form ends, and is read then
 * (`done`). The `_charset_` field itself is read in its own part's charset, else UTF-8, and kept as sent.
 *
 * Both the receiver's scan and the decoder read fields through this, so they agree on every value. What cannot be
 * read is a `{ detail }` in words of our own: read as U+FFFD or dropped, the workflow would get a value the partner
 * never sent, and a field that is no text in any charset belongs in a file part.
 */
export function fieldTexts() {
  let formCharset: string | undefined;
  let waiting: Array<{ bytes: Buffer; done: (text: string) => void }> = [];

  const read = (bytes: Buffer, charset: string): string | { detail: string } => {
    const text = readText(charset, bytes);
    if ('text' in text) return text.text;
    if (text.problem === 'unknown-charset') return { detail: `a text field is in a charset this service cannot decode (${KNOWN})` };
    if (text.problem === 'binary-charset') return { detail: 'a text field names x-user-defined as its charset, a pass-through for binary bytes rather than text: send such bytes as a file' };
    return { detail: "a text field's bytes are not valid in its charset (the form's _charset_, else UTF-8, when its Content-Type names none; send such bytes as a file)" };
  };

  const readWaiting = (charset: string): { detail: string } | null => {
    const pending = waiting;
    waiting = [];
    for (const field of pending) {
      const text = read(field.bytes, charset);
      if (typeof text !== 'string') return text;
      field.done(text);
    }
    return null;
  };

  return {
    /** The field's text, LATER (then `done` hears it) when it waits for the form's charset, or why it has none. */
    add(name: string, bytes: Buffer, charset: string, done: (text: string) => void): string | typeof LATER | { detail: string } {
      const isCharsetField = name.toLowerCase() === CHARSET_FIELD;
      if (charset === NO_CHARSET && !isCharsetField && formCharset === undefined) {
        waiting.push({ bytes, done });
        return LATER;
      }
      const text = read(bytes, charset === NO_CHARSET ? (isCharsetField ? 'utf-8' : formCharset!) : charset);
      if (typeof text !== 'string' || !isCharsetField || formCharset !== undefined) return text;
      const label = text.trim();
      const usable = readText(label, Buffer.alloc(0));
      if ('problem' in usable && usable.problem === 'unknown-charset') return { detail: `the form's _charset_ field names a charset this service cannot decode (${KNOWN})` };
      if ('problem' in usable && usable.problem === 'binary-charset') return { detail: "the form's _charset_ field names x-user-defined, a pass-through for binary bytes rather than a charset" };
      formCharset = label;
      return readWaiting(label) ?? text;
    },
    /** The form is over: fields still waiting are read as UTF-8. */
    end: (): { detail: string } | null => readWaiting('utf-8'),
  };
}
