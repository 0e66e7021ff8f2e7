import { ConfigError, loadConfig } from '../../services/platform/config/config';

const problems = (env: Record<string, string>) => {
  try { loadConfig(env); return []; } catch (error) { return (error as ConfigError).problems; }
};
const TOKEN_A = 'a'.repeat(32);
const TOKEN_B = 'B-._~+/='.repeat(4);

test('ADMIN_HOST is loopback unless configured', () => {
  expect(loadConfig({}).adminHost).toBe('127.0.0.1');
  expect(loadConfig({ ADMIN_HOST: '0.0.0.0' }).adminHost).toBe('0.0.0.0');
  expect(problems({ ADMIN_HOST: 'a b' })).toEqual(['ADMIN_HOST="a b": an address or host name to listen on, e.g. 127.0.0.1 (the default) or 0.0.0.0']);
  // HOST, the public port's, is held to the same rule (before: a failed listen, exit 1, not 78).
  expect(problems({ HOST: 'x y' })).toEqual(['HOST="x y": an address or host name to listen on, e.g. 0.0.0.0 (the default) or 127.0.0.1']);
});

test('ADMIN_TOKENS: name:scope:token entries', () => {
  expect(loadConfig({}).adminTokens).toEqual([]);
  expect(loadConfig({ ADMIN_TOKENS: ` ops:full:${TOKEN_A} , viewer:read:${TOKEN_B}` }).adminTokens).toEqual([
    { name: 'ops', scope: 'full', token: TOKEN_A },
    { name: 'viewer', scope: 'read', token: TOKEN_B },
  ]);
});

test('ADMIN_TOKENS problems are precise and never quote a token', () => {
  const short = 'short-secret-value';
  const found = problems({ ADMIN_TOKENS: `ops:full:${short},ops:write:${TOKEN_A},,bad name:read:${TOKEN_B},x:read:${TOKEN_A},local-cli:full:${'c'.repeat(40)},nocolons` });
  expect(found).toEqual([
    'ADMIN_TOKENS entry 1 ("ops"): the token must be at least 32 characters (e.g. `openssl rand -base64 32`)',
    'ADMIN_TOKENS entry 2 ("ops"): the name is used twice',
    'ADMIN_TOKENS entry 2 ("ops"): the scope must be read or full',
    'ADMIN_TOKENS entry 3 is empty: write name:scope:token entries separated by single commas',
    'ADMIN_TOKENS entry 4: the name must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit',
    'ADMIN_TOKENS entry 5 ("x"): the same token as an earlier entry',
    'ADMIN_TOKENS entry 6 ("local-cli"): the name local-cli is the running service\'s own token for the CLI on its machine; choose another',
    'ADMIN_TOKENS entry 7: expected name:scope:token (scope read or full)',
  ]);
  expect(found.join('\n')).not.toContain(short);
  expect(found.join('\n')).not.toContain(TOKEN_A);
  expect(problems({ ADMIN_TOKENS: `ops:full:${'é'.repeat(32)}` })).toEqual(['ADMIN_TOKENS entry 1 ("ops"): the token may hold only letters, digits and - . _ ~ + / =']);
  // Found by config-fuzz.test.ts: a token written first was quoted as the entry's name.
  expect(problems({ ADMIN_TOKENS: `${TOKEN_A}:full:ops` })).toEqual(['ADMIN_TOKENS entry 1: the token must be at least 32 characters (e.g. `openssl rand -base64 32`)']);
});

test('ADMIN_URL and ADMIN_TOKEN go together', () => {
  expect(loadConfig({ ADMIN_URL: 'http://127.0.0.1:8081/', ADMIN_TOKEN: TOKEN_A }).adminClient).toEqual({ url: 'http://127.0.0.1:8081', token: TOKEN_A });
  expect(problems({ ADMIN_URL: 'http://127.0.0.1:8081' })).toEqual(['ADMIN_URL is set without ADMIN_TOKEN: set both for the CLI to use a running service\'s management API, or neither']);
  expect(problems({ ADMIN_URL: 'ftp://x', ADMIN_TOKEN: TOKEN_A })).toEqual(['ADMIN_URL="ftp://x": the admin port\'s base URL, e.g. http://127.0.0.1:8081 (the token goes in ADMIN_TOKEN)']);
});

test('an ADMIN_URL is never quoted with its userinfo or query, and may not carry them', () => {
  const shown = (url: string) => problems({ ADMIN_URL: url, ADMIN_TOKEN: TOKEN_A });
  // It does not parse: shown without what came before the @.
  expect(shown('http://user:TOPSECRETPW@[bad')).toEqual(['ADMIN_URL="http://…@[bad": the admin port\'s base URL, e.g. http://127.0.0.1:8081 (the token goes in ADMIN_TOKEN)']);
  expect(shown('http://user:TOP/SECRET@[bad?token=TOPSECRET2')).toEqual([expect.stringMatching(/^ADMIN_URL="http:\/\/…@\[bad…": /)]);
  expect(shown('http://user:TOPSECRETPW@127.0.0.1:8081')).toEqual(['ADMIN_URL="http://…@127.0.0.1:8081": no user or password in it; the admin port\'s base URL, e.g. http://127.0.0.1:8081 (the token goes in ADMIN_TOKEN)']);
  expect(shown('http://127.0.0.1:8081/?token=TOPSECRET')).toEqual([expect.stringMatching(/^ADMIN_URL="http:\/\/127\.0\.0\.1:8081\/…": no query or fragment in it/)]);
  expect(JSON.stringify([shown('http://user:TOPSECRETPW@[bad'), shown('http://u:TOPSECRET@h/?TOPSECRET')])).not.toContain('TOPSECRET');
});
