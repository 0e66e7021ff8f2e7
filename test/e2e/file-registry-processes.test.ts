import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openFileRegistry } from '../../services/platform/registry/file-registry';

/**
 * The file registry's compare-and-set across processes (the service and the CLI on one DATA_DIR): each write of a
 * document holds its lock file, so read-modify-writes from several processes at once lose none. The processes run
 * the built registry (npm run build), as the CLI does.
 */
const REGISTRY = path.resolve(__dirname, '../../dist/services/platform/registry/file-registry.js');

const incrementer = (dataDir: string, times: number) => `
  const { openFileRegistry } = require(${JSON.stringify(REGISTRY)});
  (async () => {
    const registry = await openFileRegistry(${JSON.stringify(dataDir)});
    for (let i = 0; i < ${times}; i++) {
      for (;;) {
        const before = await registry.workflows.get('wf-count');
        if (await registry.workflows.putIf({ ...before, name: String(Number(before.name) + 1) }, before)) break;
      }
    }
    await registry.close();
  })().catch((error) => { console.error(error); process.exit(1); });`;

test('four processes, each making 40 read-modify-writes of one document at once, lose none', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'registry-processes-'));
  try {
    const registry = await openFileRegistry(dataDir);
    await registry.workflows.put({ id: 'wf-count', active: true, nodes: [], name: '0' });
    const codes = await Promise.all(Array.from({ length: 4 }, () => new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, ['-e', incrementer(dataDir, 40)], { stdio: ['ignore', 'ignore', 'inherit'] });
      child.once('exit', resolve);
    })));
    expect(codes).toEqual([0, 0, 0, 0]);
    expect((await registry.workflows.get('wf-count'))!.name).toBe('160');
    await registry.close();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
