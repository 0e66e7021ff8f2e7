import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * kafkajs's negative timer (services/cli/process-warnings.ts) is silenced, and only it: run in a plain Node
 * process (jest's `process` is a copy), with the filter compiled from the TypeScript source by swc.
 */
const warns = Number(process.versions.node.split('.')[0]) >= 23; // Node 23+ prints TimeoutNegativeWarning

describe('the kafkajs negative-timeout warning', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'warnings-'));
    const queue = path.join(dir, 'node_modules', 'kafkajs', 'src', 'network', 'requestQueue');
    mkdirSync(queue, { recursive: true });
    // What kafkajs 2.2.4's RequestQueue.scheduleCheckPendingRequests does with no throttle and nothing pending.
    writeFileSync(path.join(queue, 'index.js'), 'exports.schedule = () => setTimeout(() => {}, -1 - Date.now());\n');
    writeFileSync(path.join(dir, 'elsewhere.js'), 'exports.schedule = () => setTimeout(() => {}, -5);\n');
    const { code } = require('@swc/core').transformFileSync(path.resolve(__dirname, '../../services/cli/process-warnings.ts'), { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } });
    writeFileSync(path.join(dir, 'process-warnings.js'), code);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (script: string) => spawnSync(process.execPath, ['-e', script], { cwd: dir, encoding: 'utf8' }).stderr;
  const quiet = "require('./process-warnings').quietKafkajsNegativeTimeouts();";

  it('is dropped when kafkajs\'s request queue sets the timer', () => {
    expect(run(`${quiet} require('./node_modules/kafkajs/src/network/requestQueue').schedule();`)).not.toContain('TimeoutNegativeWarning');
    if (warns) expect(run(`require('./node_modules/kafkajs/src/network/requestQueue').schedule();`)).toContain('TimeoutNegativeWarning');
  });

  it('still warns for a negative timer anywhere else, and for other warnings', () => {
    const out = run(`${quiet} require('./elsewhere').schedule(); process.emitWarning('something else', 'OtherWarning');`);
    if (warns) expect(out).toContain('TimeoutNegativeWarning: -5 is a negative number');
    expect(out).toContain('OtherWarning: something else');
  });
});
