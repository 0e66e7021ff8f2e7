/** `/hook/{workflowId}` and `/hook/{workflowId}/{suffix…}`; null for every other path. */
export interface HookRoute {
  workflowId: string;
  pathSuffix: string | null;
  query: Record<string, string[]>;
}

export function parseHookRoute(url: string): HookRoute | null {
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
    if (slash >= 0) {
      const s = rest.slice(slash + 1).replace(/\/+$/, '');
      suffix = s === '' ? null : decodeURIComponent(s);
    }
  } catch {
    return null; // malformed percent-encoding
  }
  if (workflowId === '') return null;
  const query: Record<string, string[]> = {};
  if (q >= 0) {
    for (const [name, value] of new URLSearchParams(url.slice(q + 1))) (query[name] ??= []).push(value);
  }
  return { workflowId, pathSuffix: suffix, query };
}
