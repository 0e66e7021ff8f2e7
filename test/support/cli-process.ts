import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';

/** The compiled CLI (`npm test` compiles first), run as a real child process. */
export const CLI = path.resolve(__dirname, '../../dist/services/cli/main.js');

export interface ServiceProcess {
  child: ChildProcess;
  baseUrl: string;
  output(): string;
}

/** Test-only code the service loads before its own (`node --require`), in its worker threads too. */
export const STAGE_WORKER_CRASH = path.resolve(__dirname, 'stage-worker-crash.js');
/** Preloaded (`--require`) to log which observable-gauge callbacks each collection runs (gauge-callbacks.js). */
export const GAUGE_CALLBACKS = path.resolve(__dirname, 'gauge-callbacks.js');

/**
 * `ingress start` in a child; resolves once it prints the address it listens on (or, without the receiver, once
 * it started). `nodeArgs` go before the CLI (e.g. `--require` a module); `script` replaces the CLI with code
 * given to `node -e` that starts the service itself. `upWithinMs` (30 s): how long it may take.
 */
export function startServiceProcess(env: Record<string, string>, args: string[] = [], options: { nodeArgs?: string[]; script?: string; upWithinMs?: number } = {}): Promise<ServiceProcess> {
  return new Promise((resolve, reject) => {
    const argv = options.script !== undefined ? [...(options.nodeArgs ?? []), '-e', options.script] : [...(options.nodeArgs ?? []), CLI, 'start', ...args];
    const child = spawn(process.execPath, argv, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const within = options.upWithinMs ?? 30_000;
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`ingress start did not come up in ${within / 1000} s:\n${out.slice(-3000)}`)); }, within);
    // Without the receiver there is no address to wait for: the started log line says the stages run.
    const services = args.indexOf('--services') >= 0 ? args[args.indexOf('--services') + 1] : 'receiver';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) { clearTimeout(timer); resolve({ child, baseUrl: m[1].replace('localhost', '127.0.0.1'), output: () => out }); }
      else if (!services.includes('receiver') && out.includes('ingress started')) { clearTimeout(timer); resolve({ child, baseUrl: '', output: () => out }); }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`ingress start exited with ${code} before listening:\n${out.slice(-3000)}`)); });
  });
}

/** Run the CLI to its end; with `sigtermOn`, send it SIGTERM once its output contains that text (for `start`). */
export function runCli(args: string[], env: Record<string, string>, input?: string, sigtermOn?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    const watch = () => { if (sigtermOn && !signalled && (stdout + stderr).includes(sigtermOn)) { signalled = true; child.kill('SIGTERM'); } };
    child.stdout.on('data', (d) => { stdout += d; watch(); });
    child.stderr.on('data', (d) => { stderr += d; watch(); });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input ?? '');
  });
}

export function waitForExit(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => { if (child.exitCode !== null || child.signalCode !== null) resolve(); else child.once('exit', () => resolve()); });
}
