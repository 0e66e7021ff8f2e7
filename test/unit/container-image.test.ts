import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * What the image and the compose file must hold for the service to run in them. No Docker engine runs in the
 * tests, so these read the files: they do not build or start anything.
 */
const root = path.resolve(__dirname, '../..');
const read = (name: string) => readFileSync(path.join(root, name), 'utf8');

/** The final stage's instructions, continuation lines joined. */
function finalStage(dockerfile: string): Array<[string, string]> {
  const lines = dockerfile.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const from = lines.map((l) => /^FROM\b/i.test(l)).lastIndexOf(true);
  return lines.slice(from).map((l) => { const at = l.indexOf(' '); return [l.slice(0, at).toUpperCase(), l.slice(at + 1).trim()]; });
}

test('the image gives the node user a DATA_DIR it can write, kept on a volume', () => {
  const stage = finalStage(read('Dockerfile'));
  const env = stage.find(([op, arg]) => op === 'ENV' && /^DATA_DIR[= ]/.test(arg));
  expect(env).toBeDefined();
  const dataDir = (env as [string, string])[1].replace(/^DATA_DIR[= ]\s*/, '');
  expect(dataDir).toMatch(/^\//);
  const user = stage.findIndex(([op]) => op === 'USER');
  expect(stage[user]?.[1]).toBe('node');
  const made = stage.findIndex(([op, arg]) => op === 'RUN' && arg.includes(`mkdir -p ${dataDir}`) && new RegExp(`chown (-R )?node:node ${dataDir}\\b`).test(arg));
  expect(made).toBeGreaterThanOrEqual(0);
  expect(made).toBeLessThan(user);
  expect(stage.some(([op, arg]) => op === 'VOLUME' && arg.split(/[\s,"[\]]+/).includes(dataDir))).toBe(true);
});

test('compose: the Cosmos emulator is reached by the host name its certificate carries', () => {
  const compose = read('docker-compose.yml');
  const endpointHost = new URL(/COSMOS_ENDPOINT:\s*(\S+)/.exec(compose)?.[1] ?? 'x:').hostname;
  const cosmosService = /\n {2}cosmos:\n((?: {4}.*\n|\s*\n)+)/.exec(compose)?.[1] ?? '';
  expect(cosmosService).toContain('image: mcr.microsoft.com/cosmosdb/');
  expect(/\n {4}hostname:\s*(\S+)/.exec(`\n${cosmosService}`)?.[1]).toBe(endpointHost);
});
