import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The folder rules of docs/architecture.md ("A file's folder says who may import it"), checked on every
 * relative import under services/. Triggers reach the platform only through its ports and the pure modules
 * listed here (types, parsers, checks: no I/O, no adapter); a new entry is a decision for review.
 */
const SERVICES = path.join(__dirname, '../../services');

const STAGES_AND_RECEIVER = ['receiver', 'decoder', 'dispatcher', 'sampler', 'mdn', 'journal'];
const MAY_IMPORT: Record<string, readonly string[]> = {
  platform: [],
  triggers: ['platform'],
  ...Object.fromEntries(STAGES_AND_RECEIVER.map((folder) => [folder, ['triggers', 'platform']])),
  admin: ['triggers', 'platform'],
  cli: ['admin', 'triggers', 'platform', ...STAGES_AND_RECEIVER],
};

/** What of platform/ triggers may import, and why each is no adapter. */
const PLATFORM_FOR_TRIGGERS: Record<string, string> = {
  'platform/log/event-log': 'the EventLog port (its record limits)',
  'platform/store/object-store': 'the ObjectStore port',
  'platform/registry/registry': 'the Registry port',
  'platform/registry/journal': 'the JournalStore port and its entries (the Registry port names it)',
  'platform/logger/logger': 'the Logger port',
  'platform/logger/redact': 'pure: what a log line must not show',
  'platform/avro/records': 'the record types',
  'platform/registry/documents': 'the registry documents: types and their parsers',
  'platform/registry/document-checks': 'pure checks of documents',
  'platform/registry/certificate-facts': 'pure: what a certificate says',
  'platform/registry/as2-credential': 'pure: the AS2 credential document',
  'platform/registry/as2-retired-keys': 'pure: the AS2 keys a put retired, and which keys are current',
  'platform/registry/signature-credentials': 'pure: the signature credentials\' shapes and checks',
  'platform/registry/hmac-presets': 'a table of data: each vendor\'s HMAC signature',
  'platform/net/url-allow-list': 'pure URL parsing and matching (the guarded POST, an adapter, is not here)',
};

function importsOf(): { from: string; to: string }[] {
  const edges: { from: string; to: string }[] = [];
  for (const file of readdirSync(SERVICES, { recursive: true }) as string[]) {
    if (!file.endsWith('.ts')) continue;
    const source = readFileSync(path.join(SERVICES, file), 'utf8');
    for (const m of source.matchAll(/(?:from\s+|import\(\s*|require\(\s*)'(\.{1,2}\/[^']+)'/g)) {
      const to = path.relative(SERVICES, path.resolve(path.dirname(path.join(SERVICES, file)), m[1])).split(path.sep).join('/');
      edges.push({ from: file.split(path.sep).join('/'), to });
    }
  }
  return edges;
}

const edges = importsOf();
const top = (p: string) => p.split('/')[0];

test('the imports are found (the rules below check something)', () => {
  expect(edges.filter((e) => top(e.from) === 'triggers' && top(e.to) === 'platform').length).toBeGreaterThan(10);
  expect(edges.filter((e) => top(e.from) === 'cli' && top(e.to) === 'receiver').length).toBeGreaterThan(0);
  expect(Object.keys(MAY_IMPORT).sort()).toEqual(readdirSync(SERVICES, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort());
});

test('each folder imports only the folders it may', () => {
  const broken = edges.filter((e) => top(e.from) !== top(e.to) && !MAY_IMPORT[top(e.from)]?.includes(top(e.to)));
  expect(broken.map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
});

test('triggers reach the platform only through its ports and pure modules', () => {
  const broken = edges.filter((e) => top(e.from) === 'triggers' && top(e.to) === 'platform' && !(e.to in PLATFORM_FOR_TRIGGERS));
  expect(broken.map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
});

test('what triggers may import of the platform imports nothing else of it (no adapter comes in behind a port)', () => {
  const broken = edges.filter((e) => e.from.replace(/\.ts$/, '') in PLATFORM_FOR_TRIGGERS && !(e.to in PLATFORM_FOR_TRIGGERS));
  expect(broken.map((e) => `${e.from} -> ${e.to}`)).toEqual([]);
});
