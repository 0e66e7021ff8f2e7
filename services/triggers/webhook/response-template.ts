/**
 * Response templates of the webhook node (Response Data body and Response Header values, SPEC §2.1,
 * DESIGN §5): text with `{{ path }}` placeholders. A placeholder is only ever a path look-up into the
 * request scope — a root (`$request`, `$headers`, `$query`, `$params`, `$json`) followed by `.name`,
 * `['name']`, `["name"]` or `[0]` accessors. Nothing is evaluated, so a template cannot run code.
 *
 * Templates are compiled once (when a workflow is stored, and again through the bounded cache on the
 * hot path) and rendered per request. Rendering never throws for missing data — a path that leads
 * nowhere renders empty (or `null` as a JSON value) — and throws TemplateError only when the output
 * would exceed MAX_OUTPUT_BYTES.
 */

import { isRawJson } from '../json-numbers';

export const MAX_TEMPLATE_BYTES = 64 * 1024;
export const MAX_PLACEHOLDERS = 200;
export const MAX_OUTPUT_BYTES = 1024 * 1024;
export const TEMPLATE_CACHE_ENTRIES = 1000;

export const TEMPLATE_ROOTS = ['$request', '$headers', '$query', '$params', '$json'] as const;
export type TemplateRoot = (typeof TEMPLATE_ROOTS)[number];

/** What a template can see. Header names are stored lower-case. */
export interface TemplateScope {
  $request: { id: string; receivedAt: string };
  $headers: Record<string, string>;
  $query: Record<string, string | string[]>;
  $params: { workflowId: string; path: string | null };
  $json: unknown;
}

/**
 * 'json': the output is a JSON body; a value inside a JSON string literal of the template is escaped
 * for that string, a value elsewhere is substituted as a JSON value. 'text': plain substitution for a
 * header value; control characters are removed and characters beyond Latin-1 become '?', so the value
 * can neither split the header nor make Node's setHeader throw. 'body': plain substitution for a body
 * that is not JSON (text/plain), nothing removed.
 */
export type RenderMode = 'text' | 'json' | 'body';

/** One placeholder as parsed, for callers that want to lint a template (e.g. warn on unknown roots). */
export interface TemplateExpression {
  /** The expression text between the braces, trimmed. */
  readonly source: string;
  /** Offset of the opening `{{` in the template. */
  readonly position: number;
  readonly root: string;
  readonly keys: readonly string[];
  /** True when the placeholder sits inside a JSON string literal of the template's literal text. */
  readonly inJsonString: boolean;
}

export interface CompiledTemplate {
  readonly source: string;
  readonly expressions: readonly TemplateExpression[];
  /** The text around the placeholders, in order (one more than the placeholders). */
  readonly literals: readonly string[];
  render(scope: TemplateScope, mode: RenderMode): string;
}

export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  constructor(
    message: string,
    /** Offset in the template of the offending placeholder, when there is one. */
    readonly position?: number,
    /** The offending expression text, when there is one. */
    readonly expression?: string,
  ) {
    super(message);
  }
}

const KNOWN_ROOTS: ReadonlySet<string> = new Set(TEMPLATE_ROOTS);
const hasOwn = (target: object, key: string): boolean => Object.prototype.hasOwnProperty.call(target, key);

// ---------------------------------------------------------------------------------------------
// Compilation

interface Placeholder extends TemplateExpression {
  /** The literal text before this placeholder ends inside a JSON string with a dangling backslash. */
  readonly afterBackslash: boolean;
}

const isIdentStart = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c === '_' || c === '$';
const isIdentPart = (c: string) => isIdentStart(c) || (c >= '0' && c <= '9');
const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r';

/** Thrown inside the expression parser; turned into a TemplateError naming the whole expression. */
class Syntax extends Error {}

/**
 * Parses the expression starting at `start` (just after `{{`) up to and including the closing `}}`.
 * Returns the root, the keys and the offset just past `}}`.
 */
function parseExpression(source: string, start: number): { root: string; keys: string[]; end: number; closeAt: number } {
  let i = start;
  const skipSpace = () => { while (i < source.length && isSpace(source[i])) i++; };
  const identifier = (what: string): string => {
    if (i >= source.length || !isIdentStart(source[i])) throw new Syntax(`expected ${what}`);
    const from = i;
    while (i < source.length && isIdentPart(source[i])) i++;
    return source.slice(from, i);
  };

  skipSpace();
  const root = identifier('a root such as $json');
  const keys: string[] = [];
  for (;;) {
    const c = source[i];
    if (c === '.') {
      i++;
      keys.push(identifier('a property name after "."'));
    } else if (c === '[') {
      i++;
      skipSpace();
      const q = source[i];
      if (q === '"' || q === "'") {
        i++;
        let key = '';
        for (;;) {
          if (i >= source.length) throw new Syntax('unterminated string in [...]');
          const ch = source[i++];
          if (ch === q) break;
          if (ch === '\\') {
            const next = source[i++];
            if (next !== '\\' && next !== '"' && next !== "'") throw new Syntax('only \\\\, \\" and \\\' escapes are allowed in [...]');
            key += next;
          } else {
            key += ch;
          }
        }
        keys.push(key);
      } else if (q >= '0' && q <= '9') {
        const from = i;
        while (i < source.length && source[i] >= '0' && source[i] <= '9') i++;
        const digits = source.slice(from, i);
        if (digits.length > 1 && digits[0] === '0') throw new Syntax('an index must not have leading zeros');
        keys.push(digits);
      } else {
        throw new Syntax('expected a quoted name or an index in [...]');
      }
      skipSpace();
      if (source[i] !== ']') throw new Syntax('expected "]"');
      i++;
    } else {
      break;
    }
  }
  skipSpace();
  if (source[i] !== '}' || source[i + 1] !== '}') throw new Syntax('expected "}}" after the path');
  return { root, keys, closeAt: i, end: i + 2 };
}

/** Compiles a template; throws TemplateError for a malformed placeholder or when a limit is exceeded. */
export function compileTemplate(source: string): CompiledTemplate {
  if (typeof source !== 'string') throw new TemplateError('A template must be a string');
  const bytes = Buffer.byteLength(source, 'utf8');
  if (bytes > MAX_TEMPLATE_BYTES) {
    throw new TemplateError(`Template is ${bytes} bytes; at most ${MAX_TEMPLATE_BYTES} are allowed`);
  }

  const literals: string[] = [];
  const placeholders: Placeholder[] = [];
  // JSON string-literal state of the literal text (placeholders do not change it: a value inside a
  // string is escaped for the string, a value outside one is a complete JSON value).
  let inString = false;
  let escaped = false;
  /** Hex digits a `\u` escape still needs: a placeholder among them would make them of a value a partner sends. */
  let hexLeft = 0;
  const scanLiteral = (text: string) => {
    for (let k = 0; k < text.length; k++) {
      const c = text[k];
      // A character that cuts a \u escape short is read as any other (the template is no JSON then, but a quote
      // still ends the string, as a reader of the rendered text would take it).
      if (hexLeft > 0) { if (/[0-9a-fA-F]/.test(c)) { hexLeft--; continue; } hexLeft = 0; }
      if (!inString) { if (c === '"') inString = true; }
      else if (escaped) { escaped = false; if (c === 'u') hexLeft = 4; }
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    }
  };

  let cursor = 0;
  for (;;) {
    const open = source.indexOf('{{', cursor);
    if (open < 0) break;
    const literal = source.slice(cursor, open);
    scanLiteral(literal);
    if (inString && hexLeft > 0) {
      throw new TemplateError(`A "\\u" escape at position ${open} is cut short by a placeholder: it needs four hex digits of its own`, open);
    }
    if (placeholders.length === MAX_PLACEHOLDERS) {
      throw new TemplateError(`Template has more than ${MAX_PLACEHOLDERS} placeholders`, open);
    }
    const close = source.indexOf('}}', open + 2);
    const text = (close < 0 ? source.slice(open + 2) : source.slice(open + 2, close)).trim();
    if (close < 0) {
      throw new TemplateError(`Unclosed "{{" at position ${open}: "{{${source.slice(open + 2, open + 42)}"`, open, text);
    }
    let parsed: ReturnType<typeof parseExpression>;
    try {
      parsed = parseExpression(source, open + 2);
    } catch (err) {
      if (!(err instanceof Syntax)) throw err;
      throw new TemplateError(
        `Invalid template expression "${text}" at position ${open}: ${err.message}; ` +
          'only paths such as $json.name, $headers[\'x-id\'] or $query.tags[0] are allowed',
        open,
        text,
      );
    }
    const keys = parsed.keys;
    // Header names are stored lower-case: look them up case-insensitively.
    if (parsed.root === '$headers' && keys.length > 0) keys[0] = keys[0].toLowerCase();
    literals.push(literal);
    placeholders.push(Object.freeze({
      source: source.slice(open + 2, parsed.closeAt).trim(),
      position: open,
      root: parsed.root,
      keys: Object.freeze(keys),
      inJsonString: inString,
      afterBackslash: inString && escaped,
    }));
    cursor = parsed.end;
    // A dangling backslash is paired up when rendered (render, below): it escapes nothing after the placeholder.
    escaped = false;
  }
  literals.push(source.slice(cursor));

  const expressions: readonly TemplateExpression[] = Object.freeze(
    placeholders.map(({ source: s, position, root, keys, inJsonString }) => Object.freeze({ source: s, position, root, keys, inJsonString })),
  );
  return Object.freeze({
    source,
    expressions,
    literals: Object.freeze([...literals]),
    render: (scope: TemplateScope, mode: RenderMode) => render(literals, placeholders, scope, mode),
  });
}

// ---------------------------------------------------------------------------------------------
// Rendering

/**
 * Follows a path through own properties only; undefined when it leads nowhere. A number kept as written
 * (json-numbers.ts) is a number here: a path stepping into it leads nowhere, as into any other.
 */
function lookUp(scope: TemplateScope, root: string, keys: readonly string[]): unknown {
  if (!KNOWN_ROOTS.has(root) || scope === null || typeof scope !== 'object' || !hasOwn(scope, root)) return undefined;
  let value: unknown = (scope as unknown as Record<string, unknown>)[root];
  for (const key of keys) {
    if (value === null || typeof value !== 'object' || isRawJson(value) || !hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** JSON text of a value, or undefined when it has none (undefined, functions, cycles, BigInt inside). */
function toJson(value: unknown): string | undefined {
  if (typeof value === 'bigint') return value.toString();
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** The plain-text form: strings as-is, numbers and booleans via String(), objects as JSON. */
function toText(value: unknown): string {
  if (isRawJson(value)) return value.rawJSON;
  switch (typeof value) {
    case 'string': return value;
    case 'number': case 'boolean': case 'bigint': return String(value);
    case 'object': return value === null ? '' : (toJson(value) ?? '');
    default: return '';
  }
}

// C0 controls (CR, LF, TAB, NUL...), DEL and C1 controls are removed from header values.
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f]/g;
// Node's setHeader refuses anything beyond Latin-1 (ERR_INVALID_CHAR); such characters become '?'.
const BEYOND_LATIN1_CHAR = /[^\u0000-\u00ff]/u;
const BEYOND_LATIN1 = new RegExp(BEYOND_LATIN1_CHAR.source, 'gu');

/** The first character of `text` that a header value cannot carry (beyond Latin-1), or null. */
export function beyondLatin1(text: string): string | null {
  return BEYOND_LATIN1_CHAR.exec(text)?.[0] ?? null;
}

function render(literals: readonly string[], placeholders: readonly Placeholder[], scope: TemplateScope, mode: RenderMode): string {
  const json = mode === 'json';
  let out = literals[0];
  for (let n = 0; n < placeholders.length; n++) {
    const p = placeholders[n];
    const value = lookUp(scope, p.root, p.keys);
    let piece: string;
    if (!json) {
      piece = toText(value);
    } else if (p.inJsonString) {
      // Escaped for a JSON string: a quote, backslash or newline in the value cannot end the string.
      // A backslash dangling right before the placeholder is paired up so it cannot eat the escape.
      piece = (p.afterBackslash ? '\\' : '') + JSON.stringify(toText(value)).slice(1, -1);
    } else {
      piece = value === undefined ? 'null' : (toJson(value) ?? 'null');
    }
    out += piece;
    out += literals[n + 1];
    // Characters are a lower bound on UTF-8 bytes: stop building as soon as the cap is certainly passed.
    if (out.length > MAX_OUTPUT_BYTES) throw outputTooLarge();
  }
  if (mode === 'text') out = out.replace(CONTROL_CHARS, '').replace(BEYOND_LATIN1, '?');
  if (out.length * 3 > MAX_OUTPUT_BYTES && Buffer.byteLength(out, 'utf8') > MAX_OUTPUT_BYTES) throw outputTooLarge();
  return out;
}

const outputTooLarge = () => new TemplateError(`Rendered template exceeds ${MAX_OUTPUT_BYTES} bytes`);

// ---------------------------------------------------------------------------------------------
// Cache

export interface TemplateCache {
  /** The compiled template for `source`, compiling it on a miss (compile errors are not cached). */
  get(source: string): CompiledTemplate;
  readonly size: number;
  clear(): void;
}

/** A bounded least-recently-used cache of compiled templates. */
export function createTemplateCache(maxEntries = TEMPLATE_CACHE_ENTRIES): TemplateCache {
  if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError('maxEntries must be a positive integer');
  const entries = new Map<string, CompiledTemplate>();
  return {
    get(source: string): CompiledTemplate {
      const hit = entries.get(source);
      if (hit !== undefined) {
        entries.delete(source);
        entries.set(source, hit);
        return hit;
      }
      const compiled = compileTemplate(source);
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(source, compiled);
      return compiled;
    },
    get size() { return entries.size; },
    clear() { entries.clear(); },
  };
}

/** The process-wide cache used by compileTemplateCached. */
export const templateCache: TemplateCache = createTemplateCache();

/** compileTemplate memoised in `templateCache` (at most TEMPLATE_CACHE_ENTRIES templates). */
export const compileTemplateCached = (source: string): CompiledTemplate => templateCache.get(source);
