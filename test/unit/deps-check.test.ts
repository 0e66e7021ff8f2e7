import { readFileSync } from 'node:fs';
import path from 'node:path';

/** `npm run deps:check` (infra/deps/check.js): its pure parts, and the lockfile against the advisory table. */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const check = require('../../infra/deps/check.js');
const table = JSON.parse(readFileSync(path.resolve(__dirname, '../../infra/deps/advisories.json'), 'utf8'));
const lockOf = (packages: Record<string, { version: string; dev?: boolean }>) => ({ lockfileVersion: 3, packages: { '': { name: 'x' }, ...packages } });

describe('the advisory table', () => {
  test('no advisory of the table applies to any package of package-lock.json, production or development', () => {
    const lock = JSON.parse(readFileSync(path.resolve(__dirname, '../../package-lock.json'), 'utf8'));
    expect(check.knownAdvisoryHits(lock, table).map((h: { name: string; version: string }) => `${h.name}@${h.version}`)).toEqual([]);
  });

  test('the versions this project had before are caught, nested or not', () => {
    const old = lockOf({
      'node_modules/node-forge': { version: '1.3.1' },
      'node_modules/fast-xml-parser': { version: '5.2.5' },
      'node_modules/azurite/node_modules/xml2js': { version: '0.4.23', dev: true },
      'node_modules/tough-cookie': { version: '2.5.0', dev: true },
      'node_modules/@azure/identity': { version: '3.4.2', dev: true },
      'node_modules/axios': { version: '0.27.2', dev: true },
    });
    const names = new Set(check.knownAdvisoryHits(old, table).map((h: { name: string }) => h.name));
    expect([...names].sort()).toEqual(['@azure/identity', 'axios', 'fast-xml-parser', 'node-forge', 'tough-cookie', 'xml2js']);
    const fixed = lockOf({ 'node_modules/node-forge': { version: '1.4.3' }, 'node_modules/fast-xml-parser': { version: '5.12.1' }, 'node_modules/fxp4/node_modules/fast-xml-parser': { version: '4.5.5' }, 'node_modules/xml2js': { version: '0.6.2' } });
    expect(check.knownAdvisoryHits(fixed, table)).toEqual([]);
  });

  test('ranges: every comparator must hold', () => {
    expect(check.satisfies('5.2.5', '>=5.0.0 <5.5.6')).toBe(true);
    expect(check.satisfies('5.5.6', '>=5.0.0 <5.5.6')).toBe(false);
    expect(check.satisfies('4.5.4', '>=5.0.0 <5.5.6')).toBe(false);
    expect(check.satisfies('1.4.3', '<1.4.3')).toBe(false);
    expect(check.satisfies('1.4.3-rc.1', '<1.4.3')).toBe(true);
    expect(check.satisfies('1.4.2', '<=1.4.2')).toBe(true);
    expect(check.satisfies('2.0.0', '>1.9.9')).toBe(true);
    expect(check.satisfies('1.0.0', '1.0.0')).toBe(true);
    expect(() => check.satisfies('1.0.0', '<one')).toThrow('cannot read');
  });
});

describe('majors behind', () => {
  test.each([
    ['4.5.1', '4.10.1', [], 0],
    ['2.12.0', '3.1.0', [], 1],
    ['1.2.3', '3.0.0', [], 2],
    ['3.1.0', '2.12.1', [], 0],
    ['0.32.0', '0.33.0', ['0.32.0', '0.33.0'], 1],
    ['0.223.0', '0.301.0', ['0.222.0', '0.223.0', '0.300.0', '0.300.1', '0.301.0-rc.1', '0.301.0'], 2],
    ['0.223.0', '0.301.0', [], 1],
    ['0.9.0', '2.0.0', [], 2],
  ])('%s → %s is %d (published %j)', (current, latest, published, expected) => {
    expect(check.majorsBehind(current, latest, published)).toBe(expected);
  });
});

describe('what npm audit answered', () => {
  test('the registry refusing the bulk endpoint, or no JSON at all, is unreachable: a warning, not a pass or a failure', () => {
    const refused = JSON.stringify({ message: '405 Method Not Allowed - POST https://registry.npmjs.org/-/npm/v1/security/advisories/bulk', statusCode: 405, error: { summary: '', detail: '' } });
    expect(check.classifyAudit(refused, 'npm error audit endpoint returned an error')).toEqual({ state: 'unreachable', reason: '405 Method Not Allowed - POST https://registry.npmjs.org/-/npm/v1/security/advisories/bulk' });
    expect(check.classifyAudit('', 'npm error code ENOTFOUND\nnpm error network request failed')).toEqual({ state: 'unreachable', reason: 'npm error code ENOTFOUND' });
  });

  test('advisories are findings; none is clean; no lockfile is an error', () => {
    const vulnerable = JSON.stringify({
      auditReportVersion: 2,
      vulnerabilities: { 'node-forge': { name: 'node-forge', severity: 'high', isDirect: true, range: '<=1.3.1', via: [{ source: 1, title: 'ASN.1 validator desynchronization', url: 'https://github.com/advisories/GHSA-x' }] } },
      metadata: { vulnerabilities: { info: 0, low: 0, moderate: 0, high: 1, critical: 0, total: 1 } },
    });
    expect(check.classifyAudit(vulnerable, '')).toEqual({ state: 'vulnerable', findings: [{ name: 'node-forge', severity: 'high', range: '<=1.3.1', advisories: ['ASN.1 validator desynchronization (https://github.com/advisories/GHSA-x)'] }] });
    expect(check.classifyAudit(JSON.stringify({ auditReportVersion: 2, vulnerabilities: {}, metadata: { vulnerabilities: { total: 0 } } }), '')).toEqual({ state: 'clean' });
    expect(check.classifyAudit(JSON.stringify({ error: { code: 'ENOLOCK', summary: 'This command requires an existing lockfile.' } }), '')).toEqual({ state: 'error', reason: 'npm audit needs package-lock.json' });
  });
});
