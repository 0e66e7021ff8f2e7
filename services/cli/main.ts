#!/usr/bin/env node
// First: sizes libuv's thread pool before anything can start it.
import './thread-pool';
import { existsSync } from 'node:fs';
import { ConfigError, loadConfig, type Config } from '../platform/config/config';
import { createLogger, type LineWriter } from '../platform/logger/logger';
import { lineBatch } from '../platform/logger/line-batch';
import { parseArgs, UsageError } from './args';
import { openLog, openRegistry, openStore, sealerFor } from './backends';
import type { CommandContext } from './context';
import { BLOB_USAGE, blobCommand } from './commands/blob';
import { CREDENTIALS_USAGE, WORKFLOWS_USAGE, credentialsCommand, workflowsCommand } from './commands/documents';
import { START_USAGE, startCommand } from './commands/start';
import { TAIL_USAGE, tailCommand } from './commands/tail';
import { TOPICS_USAGE, topicsCommand } from './commands/topics';
import { REPLAY_USAGE, replayCommand } from './commands/replay';
import { DEAD_LETTERS_USAGE, deadLettersCommand } from './commands/dead-letters';
import { EVENTS_USAGE, eventsCommand } from './commands/events';
import { quietKafkajsNegativeTimeouts } from './process-warnings';
import { findRunningService } from '../admin/client';

const ENVIRONMENT = `Backends come from the environment (KAFKA_BROKERS, AZURE_STORAGE_CONNECTION_STRING, COSMOS_ENDPOINT/COSMOS_KEY, DATA_DIR):
every variable is in docs/configuration.md; the commands are in docs/operations.md ("The ingress command").`;

const USAGE = `usage:
  ${START_USAGE}
  ${WORKFLOWS_USAGE}
  ${CREDENTIALS_USAGE}
  ${TOPICS_USAGE}
  ${TAIL_USAGE}
  ${BLOB_USAGE}
  ${REPLAY_USAGE}
  ${DEAD_LETTERS_USAGE}
  ${EVENTS_USAGE}
${ENVIRONMENT}`;

const COMMANDS: Record<string, { run: typeof startCommand; valued: string[]; usage: string }> = {
  start: { run: startCommand, valued: ['services'], usage: START_USAGE },
  workflows: { run: workflowsCommand, valued: [], usage: WORKFLOWS_USAGE },
  credentials: { run: credentialsCommand, valued: [], usage: CREDENTIALS_USAGE },
  topics: { run: topicsCommand, valued: [], usage: TOPICS_USAGE },
  tail: { run: tailCommand, valued: ['max', 'timeout'], usage: TAIL_USAGE },
  blob: { run: blobCommand, valued: [], usage: BLOB_USAGE },
  replay: { run: replayCommand, valued: ['from', 'to', 'workflow', 'checkpoint', 'unknown-copies'], usage: REPLAY_USAGE },
  'dead-letters': { run: deadLettersCommand, valued: ['stage', 'since', 'workflow', 'unknown-copies'], usage: DEAD_LETTERS_USAGE },
  events: { run: eventsCommand, valued: ['workflow', 'message-id', 'post-id', 'tracking-id', 'since', 'until', 'limit'], usage: EVENTS_USAGE },
};

/** `ingress replay --help`: asked anywhere among a command's arguments (but after `--`, where it is a value). */
function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}

/**
 * DATA_DIR defaults to ./data of the current directory. `npx ingress workflows put` run from a subdirectory of the
 * project would make a second, empty ./data there and store the workflow in it, exit 0, and the service (which
 * reads the first) would answer the partner 200 and run nothing. So a command other than `start` does not make
 * the default DATA_DIR on an embedded backend: it says where it looked. A DATA_DIR that is set is taken as meant.
 */
function strayDataDir(name: string, env: NodeJS.ProcessEnv, config: Config): string | null {
  if (name === 'start' || env.DATA_DIR !== undefined) return null;
  if (config.kafka !== null && config.cosmos !== null && config.blob !== null) return null;
  if (existsSync(config.dataDir)) return null;
  return `no data directory at ${config.dataDir}: DATA_DIR (unset) is ./data of the directory the command runs in, and no service has run here. Run ingress in the directory where \`npm start\` runs, or set DATA_DIR to its data directory`;
}

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') { process.stdout.write(USAGE + '\n'); return name ? 0 : 2; }
  const command = COMMANDS[name];
  if (!command) { process.stderr.write(`unknown command "${name}"\n${USAGE}\n`); return 2; }
  // Before the configuration is read: help needs none, and a bad variable must not hide it.
  if (asksForHelp(rest)) { process.stdout.write(`usage: ${command.usage}\n${ENVIRONMENT}\n`); return 0; }

  let config;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) { process.stderr.write(`ingress: ${error.message}\n`); return 78; }
    throw error;
  }
  const stray = strayDataDir(name, env, config);
  if (stray) { process.stderr.write(`ingress ${name}: ${stray}\n`); return 78; }
  // The CLI's stdout is for data; only `start` logs there, a turn's lines at a time (line-batch.ts).
  let write: LineWriter = (line) => process.stderr.write(line + '\n');
  if (name === 'start') {
    const lines = lineBatch((text) => process.stdout.write(text));
    process.on('exit', () => lines.flush());
    write = (line, level) => lines.write(line, level);
  }
  else {
    // `ingress tail … | head -1`: the reader has gone, and what is left to print has no one to read it.
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE') process.exit(0);
      process.stderr.write(`ingress ${name}: cannot write its output: ${error.message}\n`);
      process.exit(1);
    });
  }
  const logger = createLogger({ level: config.logLevel, write });
  const ctx: CommandContext = {
    config, env, logger,
    out: (line) => process.stdout.write(line + '\n'),
    err: (line) => process.stderr.write(line + '\n'),
    openLog: () => openLog(config, logger, { readOnlyLog: true }),
    openLogForWriting: () => openLog(config, logger),
    openStore: () => openStore(config, logger),
    openRegistry: () => openRegistry(config, logger),
    sealer: () => {
      const sealer = sealerFor(config);
      if (!sealer) throw new ConfigError(['INGRESS_ENCRYPTION_KEY must be set to store or read credentials (at least 16 characters; keep it secret and stable)']);
      return sealer;
    },
    runningService: () => findRunningService(config),
  };
  try {
    return await command.run(parseArgs(rest, command.valued), ctx);
  } catch (error) {
    if (error instanceof UsageError) { process.stderr.write(`ingress ${name}: ${error.message}\n`); return 2; }
    // A value found bad only once used (a HOST that does not resolve) ends the command as one found at load does.
    if (error instanceof ConfigError) { process.stderr.write(`ingress: ${error.message}\n`); return 78; }
    process.stderr.write(`ingress ${name}: ${(error as Error).message}\n`);
    return 1;
  }
}

if (require.main === module) {
  quietKafkajsNegativeTimeouts();
  main(process.argv.slice(2), process.env).then(
    // `start` exits outright once stopped: client libraries may keep timers alive.
    (code) => { if (process.argv[2] === 'start') process.exit(code); process.exitCode = code; },
    (error) => { process.stderr.write(`ingress: ${(error as Error).stack ?? error}\n`); process.exitCode = 1; },
  );
}
