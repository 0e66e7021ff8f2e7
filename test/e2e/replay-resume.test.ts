import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { backendEnv } from '../support/app';
import { CLI, runCli } from '../support/cli-process';

/**
 * `ingress replay` stopped with Ctrl-C goes on where it stopped when run again: nothing replayed twice, nothing
 * left out. The signal is sent once the first batch is checkpointed; should the whole replay finish before it
 * lands, the rerun has nothing left to do, which the counts below still check.
 */
test('Ctrl-C, then the same command again: each record replayed exactly once', async () => {
  const { env, cleanup } = backendEnv('embedded');
  try {
    const records = 20_000;
    const log = await openEmbeddedLog({ dataDir: env.DATA_DIR });
    for (let i = 0; i < records; i += 1000) {
      await log.append(Array.from({ length: 1000 }, (_, k) => ({ topic: 'ingress.received.v1', key: 'wf-x', value: Buffer.from(`r${i + k}`) })));
    }
    await log.close();

    const checkpoints = path.join(env.DATA_DIR, 'replay');
    const first = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'replay', 'ingress.received.v1', '--from', '0'], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (d) => { stdout += d; });
      const poll = setInterval(() => {
        if (existsSync(checkpoints) && readdirSync(checkpoints).some((f) => f.endsWith('.json'))) { clearInterval(poll); child.kill('SIGINT'); }
      }, 5);
      child.on('close', (code) => { clearInterval(poll); resolve({ code, stdout }); });
    });
    const firstSummary = JSON.parse(first.stdout);
    if (first.code === 130) expect(firstSummary).toMatchObject({ interrupted: true });
    else expect(first.code).toBe(0);

    const second = await runCli(['replay', 'ingress.received.v1', '--from', '0'], env);
    expect(second.code).toBe(0);
    const secondSummary = JSON.parse(second.stdout);
    expect(firstSummary.replayed + secondSummary.replayed).toBe(records);

    const after = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
    const [{ offset }] = await after.endOffsets('ingress.received.v1');
    await after.close();
    expect(Number(offset)).toBe(2 * records);
  } finally {
    cleanup();
  }
}, 120_000);
