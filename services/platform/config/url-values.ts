/**
 * URL-valued variables. A configuration error names the variable and shows its value, but a URL can carry a
 * password (`https://user:pw@host`) or a token in its query, and a value that does not parse is shown too:
 * so what a message shows of a URL stops short of both.
 */

/** The value as a problem may quote it: userinfo replaced by `…@`, the query and fragment by `…`. */
export function shownUrl(raw: string): string {
  // Everything up to the last @ goes, not only up to the first /: a password may hold a / when the value does not parse.
  const at = raw.lastIndexOf('@');
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(raw)?.[0] ?? '';
  const withoutUser = at < 0 ? raw : `${scheme}…@${raw.slice(at + 1)}`;
  return JSON.stringify(withoutUser.replace(/[?#][\s\S]*$/, '…'));
}

/**
 * Why `raw` cannot be `name`, a base URL that paths are appended to (`/hook/{id}`, `/api/v1/…`), or null: an
 * absolute http(s) URL without userinfo, query or fragment. Userinfo would be printed in every hook URL (or,
 * for ADMIN_URL, refused by fetch: the token goes in ADMIN_TOKEN); a query or fragment would end up before
 * the appended path.
 */
export function baseUrlProblem(name: string, raw: string, meaning: string): string | null {
  let url: URL;
  try { url = new URL(raw); } catch { return `${name}=${shownUrl(raw)}: ${meaning}`; }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${name}=${shownUrl(raw)}: ${meaning}`;
  if (url.username !== '' || url.password !== '' || /^[^/]*\/\/[^/?#]*@/.test(raw)) return `${name}=${shownUrl(raw)}: no user or password in it; ${meaning}`;
  if (/[?#]/.test(raw)) return `${name}=${shownUrl(raw)}: no query or fragment in it (paths are appended to it); ${meaning}`;
  return null;
}
