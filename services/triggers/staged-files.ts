/**
 * Where a request's files go: `trigger/<workflowId>/<timestamp>/<filename>` (DESIGN.md §5). The
 * timestamp folder carries the request id too, so two requests in the same millisecond never share
 * it, and the same request staged again (a decoder retry) lands on the same paths.
 */
export function stagingFolder(workflowId: string, receivedAt: number, requestId: string): string {
  return `trigger/${workflowId}/${stampOf(receivedAt)}-${requestId.replace(/[^A-Za-z0-9]/g, '').slice(0, 12)}`;
}

/**
 * `20261126T054812123Z` for 2026-11-26T05:48:12.123Z. A decoder batch's requests mostly arrived within the
 * same second: that second's part is kept, and only the milliseconds are written per request.
 */
const stampOf = (() => {
  let second = NaN;
  let prefix = '';
  return (at: number): string => {
    const ms = ((at % 1000) + 1000) % 1000;
    if (at - ms !== second) {
      second = at - ms;
      prefix = new Date(second).toISOString().replace(/[-:]/g, '').slice(0, -5);
    }
    return `${prefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`;
  };
})();

const MAX_NAME_BYTES = 200;

/**
 * Control, format (soft hyphen, zero-width, bidi marks and overrides, byte order mark, tag characters) and
 * line/paragraph separator characters, the fillers that render as nothing (Hangul, Mongolian, Khmer), and a
 * surrogate without its pair (which no file system or UTF-8 name can hold).
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/gu;
/** The extension kept when a name is cut: a dot and at most 15 characters after it. */
const extensionOf = (name: string) => {
  const dot = name.lastIndexOf('.');
  return dot > 0 && name.length - dot <= 16 ? name.slice(dot) : '';
};
/** Characters Windows refuses in a name, for whoever saves a staged file on Windows or an SMB share. */
const WINDOWS_RESERVED_CHARS = /[:*?"<>|]/g;
/**
 * Device names Windows reserves, with any extension (`con.txt` opens the console), and spaces before it, which
 * Windows drops (`con .txt` is the console too); `COM¹`–`LPT³` with superscript digits count as `COM1`–`LPT3`.
 * `CONIN$`/`CONOUT$` open the console's input and output, `CLOCK$` was the clock device.
 */
const WINDOWS_DEVICE = /^(con|prn|aux|nul|conin\$|conout\$|clock\$|com[0-9¹²³]|lpt[0-9¹²³]) *(\.|$)/i;

/**
 * A partner-supplied file name made safe for a path segment: no directories (either slash), no control,
 * invisible or bidi characters, no leading or trailing dots or spaces, Windows' reserved characters as `_`
 * and its device names prefixed with `_`, at most 200 UTF-8 bytes (the extension kept), `file` when nothing
 * is left. Non-ASCII letters stay.
 */
export function sanitizeFilename(name: string | undefined | null): string {
  let base = (name ?? '').split(/[/\\]/).pop() ?? '';
  // A name longer than any file system takes is cut before the work below, which is then bounded too: its
  // extension kept, and never between the two halves of a character outside the BMP.
  if (base.length > 4 * MAX_NAME_BYTES) {
    const ext = extensionOf(base);
    base = base.slice(0, 4 * MAX_NAME_BYTES - ext.length).replace(/[\ud800-\udbff]$/, '') + ext;
  }
  base = base.normalize('NFC');
  base = base.replace(INVISIBLE, '').replace(WINDOWS_RESERVED_CHARS, '_');
  base = trimmed(base);
  if (base === '') return 'file';
  if (WINDOWS_DEVICE.test(base)) base = `_${base}`;
  if (Buffer.byteLength(base, 'utf8') <= MAX_NAME_BYTES) return base;
  const ext = extensionOf(base);
  // The cut can end the stem at a dot or a space again (with no extension kept, that is the name's end).
  return trimmed(fitted(base.slice(0, base.length - ext.length), ext)) || 'file';
}

const trimmed = (name: string) => name.replace(/^[.\s]+/, '').replace(/[\s.]+$/, '');

/** `stem + tail`, the stem cut so that the whole takes at most MAX_NAME_BYTES UTF-8 bytes. */
function fitted(stem: string, tail: string): string {
  const room = MAX_NAME_BYTES - Buffer.byteLength(tail, 'utf8');
  if (Buffer.byteLength(stem, 'utf8') <= room) return stem + tail;
  // One cut at the byte budget; a character split by the cut decodes as U+FFFD, which is dropped.
  return Buffer.from(stem, 'utf8').subarray(0, room).toString('utf8').replace(/\uFFFD+$/, '') + tail;
}

const TYPE_SUBTYPE = /^[a-z0-9!#$%&'*+.^_`|~-]+\/[a-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * A partner-supplied type/subtype (lower-cased) as a staged file's content type, and as its workflow output
 * says it: two tokens (RFC 9110 §5.6.2), else application/octet-stream. A MIME part inside an AS2 message can
 * carry any byte in its header; Azure drops some (a bare CR), the filesystem store keeps them, and the workflow
 * would be told a type that is stored as neither.
 */
export function stagedMediaType(type: string): string {
  return TYPE_SUBTYPE.test(type) ? type : 'application/octet-stream';
}

/**
 * Keep names unique within one request: `a.pdf`, `a (2).pdf`, `a (3).pdf`, within the same byte cap. Only an
 * extension sanitizeFilename would keep counts as one: after any dot, a stem cut to nothing would leave a name
 * that starts with a space and is over the cap (`a.<198 bytes>` as ` (2).<198 bytes>`).
 */
export function uniqueNamer(): (name: string) => string {
  const used = new Set<string>();
  return (name) => {
    let candidate = name;
    const ext = extensionOf(name);
    const stem = name.slice(0, name.length - ext.length);
    for (let n = 2; used.has(candidate.toLowerCase()); n++) candidate = fitted(stem, ` (${n})${ext}`);
    used.add(candidate.toLowerCase());
    return candidate;
  };
}
