/** `/hook/{workflowId}` and `/hook/{workflowId}/{suffix…}`; null for every other path. */
export interface HookRoute {
  workflowId: string;
  pathSuffix: string | null;
  query: Record<string, string[]>;
  /** Set when a segment of the path after `/hook/`, or of the suffix decoded, is `.` or `..` (route.ts): refused, never looked up. */
  dotSegment?: true;
}

/**
 * The scheme and authority of an absolute-form target, with the `/` after them (if any). Any scheme (RFC 3986 §3.1):
 * Node's parser passes on `ftp://user:password@host/…` too, and its authority must reach no log or span either.
 */
const ABSOLUTE_FORM = /^([a-z][a-z0-9+.-]*):\/\/[^/?]*\/?/i;
/** The schemes a hook is reached by; a target of any other (`ftp://h/hook/wf`) is no hook route. */
const HTTP_SCHEME = /^https?$/i;

/** The request target as a path and query, as the route reads it; `http` false for an absolute form of another scheme. */
function originForm(target: string): { url: string; http: boolean } {
  // A fragment is the client's own (RFC 3986 §3.5), never part of the request target (RFC 9112 §3.2), yet Node's
  // parser passes one on: kept, `/hook/wf#x` addressed the missing workflow `wf#x` and was answered 200, unrecorded.
  const hash = target.indexOf('#');
  const url = hash < 0 ? target : target.slice(0, hash);
  if (url[0] === '/') return { url, http: true };
  // RFC 9112 §3.2.2: a server accepts the absolute form (`http://host/hook/wf`), which clients send to proxies; its
  // authority (a `user:password@` too) is not kept.
  const absolute = ABSOLUTE_FORM.exec(url);
  if (absolute === null) return { url, http: true };
  return { url: `/${url.slice(absolute[0].length)}`, http: HTTP_SCHEME.test(absolute[1]) };
}

/** The target's path, for logs and spans: what the route reads, without the query (nor any authority). */
export const targetPath = (target: string): string => originForm(target).url.split('?')[0];

export function parseHookRoute(target: string): HookRoute | null {
  const { url, http } = originForm(target);
  if (!http) return null;
  const q = url.indexOf('?');
  const pathname = q >= 0 ? url.slice(0, q) : url;
  if (!pathname.startsWith('/hook/')) return null;
  const rest = pathname.slice(6);
  const slash = rest.indexOf('/');
  const rawId = slash >= 0 ? rest.slice(0, slash) : rest;
  let workflowId: string;
  let suffix: string | null = null;
  try {
    workflowId = rawId.indexOf('%') < 0 ? rawId : decodeURIComponent(rawId); // most ids need no decoding
  } catch {
    return null; // malformed percent-encoding: no workflow has such an id
  }
  if (slash >= 0) {
    const s = rest.slice(slash + 1).replace(/\/+$/, '');
    // The suffix is the partner's to choose (SPEC §4.1): a segment that is not UTF-8 percent-encoding
    // (`100%`, Latin-1 `%E9`) is forwarded as sent rather than refused.
    suffix = s === '' ? null : s.indexOf('%') < 0 ? s : s.split('/').map(decodeLoosely).join('/');
  }
  if (workflowId === '') return null;
  // Query names are the sender's: `toString` or `__proto__` must be a name like any other, not Object's.
  const query: Record<string, string[]> = Object.create(null);
  if (q >= 0) {
    for (const [name, value] of new URLSearchParams(url.slice(q + 1))) (query[name] ??= []).push(value);
  }
  return hasDotSegment(rest) || (suffix !== null && hasDecodedDotSegment(suffix)) ? { workflowId, pathSuffix: suffix, query, dotSegment: true } : { workflowId, pathSuffix: suffix, query };
}

/**
 * Whether a path (after `/hook/`) has a `.` or `..` segment. A client that sent one meant no workflow called `.`, and
 * a `..` handed on (as the id or in the suffix) could climb out of `/hook/` wherever the path is read as one. Only
 * what can make one is decoded, so a segment that is no UTF-8 (`%zz`, `%E9`) cannot hide it: `%2e` is a dot; a
 * `/` or a `\` (WHATWG URL parsers read it as `/`), raw or percent-encoded, separates segments; and what follows a
 * `;` (raw or `%3B`) is a path parameter, which some servers drop before resolving the path (Tomcat reads `..;x`
 * as `..`). `%252e` is a `%2e` to whoever decodes it once, not a dot: it is let through, as `...` and `.x` are.
 */
function hasDotSegment(path: string): boolean {
  return path.replace(/%2e/gi, '.').split(/\/|\\|%2f|%5c/i).some((segment) => {
    const bare = segment.split(/;|%3b/i)[0];
    return bare === '.' || bare === '..';
  });
}

/**
 * Whether the suffix as handed on (percent-decoded) has a segment that a consumer building a URL from it reads as
 * `.` or `..`, though the path as sent had none: WHATWG URL removes a tab, CR or LF anywhere (`.%09.`), ends the
 * path at `?` or `#` (`..%3Fx`, `..%23x`), and trims C0 controls and spaces from the ends (`..%00`). Each segment
 * (`/` or `\`) is judged with those removed, before its first `;`, `?` or `#`, and trimmed: more than the ends of
 * the whole are trimmed, and a `;` cuts only its own segment, so `a%3Bb/..%00` is refused too. WHATWG URL also
 * reads `%2e` as a dot in a segment, so `%252e%252e` (decoded: `%2e%2e`) is refused. `%c0%ae` is no UTF-8 and
 * stays as sent.
 */
function hasDecodedDotSegment(suffix: string): boolean {
  return suffix.replace(/[\t\n\r]/g, '').replace(/%2e/gi, '.').split(/[/\\]/).some((segment) => {
    const bare = segment.split(/[;?#]/)[0].replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, '');
    return bare === '.' || bare === '..';
  });
}

function decodeLoosely(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
