#!/usr/bin/env node
'use strict';
/**
 * Runs a command on a supported Node.js (22.15 or later), so that `npm test` works on a machine whose own node is
 * older (Node 20 is past its end of life, and the current Azure SDKs and OpenTelemetry need
 * 22.15):
 *
 *   node infra/node/on-supported-node.js <command> [args…]     (npm test goes through it)
 *
 * - The node running this file is supported: the command runs with the environment as it is.
 * - It is older: infra/node/ensure-node.sh gives the path of Node 24 (fetched once from the npm registry's
 *   official node-linux-<arch> package), and the command runs with that folder first on PATH, so `node` and
 *   every `#!/usr/bin/env node` script it starts (jest, the CLI) run on Node 24.
 * Written for any Node (no syntax newer than Node 12). SIGTERM and SIGHUP sent to this process are passed on;
 * SIGINT is not (a terminal's Ctrl-C reaches the whole process group, the command included). The exit status
 * is the command's. (`npm start` runs the service directly: it still starts on Node 20, unsupported.)
 */
const { execFileSync, spawn } = require('child_process');
const path = require('path');

const [major, minor] = process.versions.node.split('.').map(Number);
const supported = major > 22 || (major === 22 && minor >= 15);
const [command, ...args] = process.argv.slice(2);
if (!command) {
  process.stderr.write('usage: node infra/node/on-supported-node.js <command> [args…]\n');
  process.exit(2);
}

const env = Object.assign({}, process.env);
if (!supported) {
  let node;
  try {
    node = execFileSync(path.join(__dirname, 'ensure-node.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  } catch (error) {
    process.stderr.write(`This project needs Node.js 22.15 or later (this is ${process.version}), and Node 24 could not be fetched: install Node 24 and run the command again.\n`);
    process.exit(1);
  }
  process.stderr.write(`[node] ${process.version} is older than the 22.15 this project needs: running on ${node}\n`);
  env.PATH = `${path.dirname(node)}${path.delimiter}${env.PATH || ''}`;
}

const child = spawn(command, args, { env, stdio: 'inherit' });
process.on('SIGINT', () => undefined);
for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
child.on('error', (error) => { process.stderr.write(`could not run ${command}: ${error.message}\n`); process.exit(127); });
child.on('exit', (code, signal) => { process.exitCode = code === null ? 128 + (require('os').constants.signals[signal] || 0) : code; });
