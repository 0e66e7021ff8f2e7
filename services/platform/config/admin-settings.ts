import { baseUrlProblem } from './url-values';

/**
 * The admin port's settings beyond ADMIN_PORT (docs/management-api.md):
 *
 * - `ADMIN_HOST`: the address the admin port listens on; loopback unless configured, since the management
 *   API behind it can change workflows and credentials.
 * - `ADMIN_TOKENS`: who may call the management API, as `name:scope:token` entries separated by commas.
 *   `scope` is `read` (GET, the live tail) or `full` (every route). A token is at least 32 characters of
 *   letters, digits and `-._~+/=`; names and tokens are unique. Problems name the entry by its position and
 *   name, never by its token (nor by a name long enough to be one).
 * - `ADMIN_URL` + `ADMIN_TOKEN`: where the CLI finds a running service's API when it is not the one on this
 *   machine's DATA_DIR (services/admin/client.ts).
 */
export type AdminScope = 'read' | 'full';

export interface AdminToken {
  name: string;
  scope: AdminScope;
  token: string;
}

export interface AdminSettings {
  adminHost: string;
  adminTokens: AdminToken[];
  /** The CLI's explicit way to a running service's management API. */
  adminClient: { url: string; token: string } | null;
}

export const ADMIN_TOKEN_MIN_LENGTH = 32;

/** The running service's own token for the CLI on its machine (services/admin/local-access.ts): logs show it, ADMIN_TOKENS cannot use it. */
export const LOCAL_CLI_TOKEN_NAME = 'local-cli';
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const TOKEN = /^[A-Za-z0-9._~+/=-]+$/;

export function adminSettings(get: (name: string) => string | undefined, problems: string[]): AdminSettings {
  const adminHost = get('ADMIN_HOST') ?? '127.0.0.1';
  const hostProblem = listenHostProblem('ADMIN_HOST', adminHost, '127.0.0.1 (the default) or 0.0.0.0');
  if (hostProblem) problems.push(hostProblem);

  const adminTokens = parseAdminTokens(get('ADMIN_TOKENS'), problems);

  let adminClient: AdminSettings['adminClient'] = null;
  const url = get('ADMIN_URL');
  const token = get('ADMIN_TOKEN');
  if ((url === undefined) !== (token === undefined)) {
    problems.push(`${url === undefined ? 'ADMIN_TOKEN' : 'ADMIN_URL'} is set without ${url === undefined ? 'ADMIN_URL' : 'ADMIN_TOKEN'}: set both for the CLI to use a running service's management API, or neither`);
  } else if (url !== undefined && token !== undefined) {
    const problem = baseUrlProblem('ADMIN_URL', url, 'the admin port\'s base URL, e.g. http://127.0.0.1:8081 (the token goes in ADMIN_TOKEN)');
    if (problem) problems.push(problem);
    else adminClient = { url: url.replace(/\/+$/, ''), token };
  }
  return { adminHost, adminTokens, adminClient };
}

export function parseAdminTokens(raw: string | undefined, problems: string[]): AdminToken[] {
  if (raw === undefined) return [];
  const tokens: AdminToken[] = [];
  const names = new Set<string>();
  const secrets = new Set<string>();
  raw.split(',').forEach((entry, i) => {
    const trimmed = entry.trim();
    const at = `ADMIN_TOKENS entry ${i + 1}`;
    if (trimmed === '') { problems.push(`${at} is empty: write name:scope:token entries separated by single commas`); return; }
    const first = trimmed.indexOf(':');
    const second = first < 0 ? -1 : trimmed.indexOf(':', first + 1);
    if (second < 0) { problems.push(`${at}: expected name:scope:token (scope read or full)`); return; }
    const name = trimmed.slice(0, first);
    const scope = trimmed.slice(first + 1, second);
    const token = trimmed.slice(second + 1);
    // A name as long as a token may be one, written first (`<token>:full:ops`): such an entry is named by position only.
    const named = NAME.test(name) && name.length < ADMIN_TOKEN_MIN_LENGTH ? `${at} ("${name}")` : at;
    if (!NAME.test(name)) problems.push(`${at}: the name must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit`);
    else if (name === LOCAL_CLI_TOKEN_NAME) problems.push(`${named}: the name ${LOCAL_CLI_TOKEN_NAME} is the running service's own token for the CLI on its machine; choose another`);
    else if (names.has(name)) problems.push(`${named}: the name is used twice`);
    if (scope !== 'read' && scope !== 'full') problems.push(`${named}: the scope must be read or full`);
    // The token is never quoted, not even in part.
    if (token.length < ADMIN_TOKEN_MIN_LENGTH) problems.push(`${named}: the token must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`);
    else if (!TOKEN.test(token)) problems.push(`${named}: the token may hold only letters, digits and - . _ ~ + / =`);
    else if (secrets.has(token)) problems.push(`${named}: the same token as an earlier entry`);
    names.add(name);
    secrets.add(token);
    if (NAME.test(name) && (scope === 'read' || scope === 'full')) tokens.push({ name, scope, token });
  });
  return tokens;
}

/** HOST and ADMIN_HOST: a value no address or host name can have is a startup problem, not a failed listen. */
export function listenHostProblem(variable: string, value: string, example: string): string | null {
  return /^[A-Za-z0-9.:-]{1,253}$/.test(value) ? null : `${variable}=${JSON.stringify(value)}: an address or host name to listen on, e.g. ${example}`;
}
