import { parseArgs, UsageError } from '../../services/cli/args';
import { deadLettersCommand } from '../../services/cli/commands/dead-letters';
import { eventsCommand } from '../../services/cli/commands/events';
import { replayCommand } from '../../services/cli/commands/replay';
import { tailCommand } from '../../services/cli/commands/tail';
import type { CommandContext } from '../../services/cli/context';
import { loadConfig } from '../../services/platform/config/config';
import { caseSeed, fuzzSettings, prng, type Rng } from '../support/prng';

/**
 * Seeded command lines for the commands that parse replay and listing values themselves (`replay`, `dead-letters`,
 * `events search`, `tail`; docs/operations.md "The ingress command"): each is refused with a UsageError whose
 * message names a flag it was given (or is the usage line), or gets as far as the backends with every value it
 * passes on well-formed (no NaN, no empty string). Never another exception. The backends are a context whose every
 * opener stops the command, saying what it was asked for.
 * FUZZ_CASES (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE.
 */
const { seed: SEED, cases: CASES, only: ONLY_CASE } = fuzzSettings(3000);

const config = loadConfig({ DATA_DIR: '/nonexistent/replay-args-fuzz' });

/** Thrown by the context where the command would touch a backend: it parsed its arguments. */
class Reached extends Error {
  constructor(readonly what: string, readonly detail: unknown = null) { super(`reached ${what}`); }
}

/** What a command sends to a running service's API: the body, to look at. */
const context = (): CommandContext => ({
  config, env: {}, logger: { child: () => undefined } as never, out() {}, err() {},
  openLog: async () => { throw new Reached('openLog'); },
  openLogForWriting: async () => { throw new Reached('openLogForWriting'); },
  openStore: async () => { throw new Reached('openStore'); },
  openRegistry: async () => { throw new Reached('openRegistry'); },
  sealer: () => { throw new Reached('sealer'); },
  runningService: async () => ({
    url: 'http://127.0.0.1:1',
    request: async (_method: string, _path: string, body?: unknown) => { throw new Reached('api', body); },
  }) as never,
});

const COMMANDS: Record<string, { run: (args: ReturnType<typeof parseArgs>, ctx: CommandContext) => Promise<number>; valued: string[]; verbs: string[][] }> = {
  replay: { run: replayCommand, valued: ['from', 'to', 'workflow', 'checkpoint', 'unknown-copies'], verbs: [['ingress.received.v1'], ['ingress.decoded.v1'], ['dead-letters.v1'], [], ['a', 'b']] },
  'dead-letters': { run: deadLettersCommand, valued: ['stage', 'since', 'workflow', 'unknown-copies'], verbs: [['list'], ['replay'], ['retry'], []] },
  events: { run: eventsCommand, valued: ['workflow', 'message-id', 'post-id', 'tracking-id', 'since', 'until', 'limit'], verbs: [['search'], ['search', 'x']] },
  tail: { run: tailCommand, valued: ['max', 'timeout'], verbs: [['ingress.received.v1'], ['nope'], []] },
};

const FLAGS = ['from', 'to', 'workflow', 'checkpoint', 'unknown-copies', 'stage', 'since', 'until', 'limit', 'with-source', 'message-id', 'max', 'timeout', 'from-beginning', 'cursor'];
const VALUES = [
  '0', '00', '42', '-1', '1.5', '1e3', '0x10', '99999999999999999999', '', ' ', 'NaN', 'Infinity', 'true',
  '2026-11-22T05:00:00Z', '2026-11-22T06:00:00.250+01:00', '2026-11-22', '2026-11-22T05:00:00', '2026-11-22T23:59:60Z', '2026-02-30',
  '9999-12-31T23:59:59-23:59', '0000-01-01T00:00:00Z', '2026-11-22t05:00:00.123456789z', 'decoder', 'dispatcher', 'bogus', 'wf-a', 'skip', 'append', 'drop', '--', 'é',
];

function argv(rng: Rng, command: keyof typeof COMMANDS): string[] {
  const out: string[] = [...rng.pick(COMMANDS[command].verbs)];
  for (let i = rng.int(0, 5); i > 0; i--) {
    const flag = rng.chance(0.8) ? rng.pick(COMMANDS[command].valued) : rng.pick(FLAGS);
    const value = rng.pick(VALUES);
    const form = rng.int(0, 5);
    if (form === 0) out.push(`--${flag}`);
    else if (form === 1) out.push(`--${flag}=${value}`);
    else out.push(`--${flag}`, value);
  }
  if (rng.chance(0.05)) out.push('--');
  return out;
}

/** The values a command passed on, where it got that far, that are not well-formed. */
function malformed(detail: unknown): string[] {
  const found: string[] = [];
  const walk = (v: unknown, at: string) => {
    if (typeof v === 'number' && !Number.isFinite(v)) found.push(`${at} is ${v}`);
    else if (v === '') found.push(`${at} is empty`);
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, `${at}.${k}`);
  };
  walk(detail, 'body');
  return found;
}

test(`replay, dead-letters, events and tail command lines are refused naming a flag, or reach the backends well-formed (seed ${SEED}, ${CASES} cases)`, async () => {
  for (let n = 0; n < CASES; n++) {
    if (ONLY_CASE !== null && n !== ONLY_CASE) continue;
    const rng = prng(caseSeed(SEED, n));
    const command = rng.pick(Object.keys(COMMANDS) as Array<keyof typeof COMMANDS>);
    const line = argv(rng, command);
    const what = `seed ${SEED} case ${n} (FUZZ_CASE=${n}): ingress ${command} ${line.map((a) => JSON.stringify(a)).join(' ')}`;
    let outcome: unknown;
    try {
      outcome = await COMMANDS[command].run(parseArgs(line, COMMANDS[command].valued), context());
    } catch (error) {
      outcome = error;
    }
    if (outcome instanceof UsageError) {
      const flags = line.filter((a) => a.startsWith('--') && a !== '--').map((a) => a.slice(2).split('=')[0]);
      const named = outcome.message.startsWith('usage:') || flags.some((f) => outcome.message.includes(`--${f}`))
        || /^(no pipeline topic|replay re-feeds|stage takes|from \(.*\) is not before to \()/.test(outcome.message);
      if (!named) throw new Error(`${what}: refused without naming a flag: ${outcome.message}`);
      expect(outcome.message).not.toMatch(/undefined|\[object/);
      continue;
    }
    if (!(outcome instanceof Reached)) throw new Error(`${what}: ended with ${outcome instanceof Error ? `${outcome.name}: ${outcome.message}` : JSON.stringify(outcome)}`);
    const bad = malformed(outcome.detail);
    if (bad.length) throw new Error(`${what}: reached ${outcome.what} with ${bad.join(', ')}`);
  }
});

test('events search names the flags typed, not the API fields they fill, before it opens the registry', async () => {
  const search = (...line: string[]) => eventsCommand(parseArgs(['search', ...line], COMMANDS.events.valued), context());
  const oneKey = new UsageError('give at most one of --message-id, --post-id, --tracking-id');
  await expect(search('--post-id', '1', '--tracking-id', '2')).rejects.toThrow(oneKey);
  await expect(search('--message-id', 'm@x', '--post-id', '1', '--workflow', 'wf-a')).rejects.toThrow(oneKey);
  await expect(search('--since', '2026-11-22T06:00:00Z', '--until', '2026-11-22T05:00:00Z')).rejects.toThrow(new UsageError('--since must be before --until'));
  await expect(search('--since', '2026-11-22T05:00:00Z', '--until', '2026-11-22T05:00:00Z')).rejects.toThrow(new UsageError('--since must be before --until'));
  await expect(search('--tracking-id', '2', '--since', '2026-11-22T05:00:00Z', '--until', '2026-11-22T06:00:00Z')).rejects.toThrow(Reached);
});

test('a flag given twice is refused, naming it, rather than the last one winning unsaid', async () => {
  expect(() => parseArgs(['ingress.received.v1', '--from', '0', '--from=500'], ['from'])).toThrow(new UsageError('--from is given twice; give it once'));
  expect(() => parseArgs(['list', '--with-source', '--with-source'], [])).toThrow('--with-source is given twice; give it once');
  // After `--` it is a value.
  expect(parseArgs(['--from', '0', '--', '--from'], ['from'])).toEqual({ positionals: ['--from'], flags: new Map([['from', '0']]) });
  await expect(replayCommand(parseArgs(['ingress.received.v1', '--from', '0', '--workflow', 'wf-a'], COMMANDS.replay.valued), context())).rejects.toThrow(Reached);
});

test('an empty value of a text flag is refused as a missing one: it selected nothing and said nothing', async () => {
  for (const line of [['replay', '--workflow='], ['replay', '--workflow', ''], ['list', '--workflow=']]) {
    await expect(deadLettersCommand(parseArgs(line, COMMANDS['dead-letters'].valued), context())).rejects.toThrow(new UsageError('--workflow needs a value'));
  }
  await expect(replayCommand(parseArgs(['ingress.received.v1', '--from', '0', '--workflow='], COMMANDS.replay.valued), context())).rejects.toThrow(new UsageError('--workflow needs a value'));
  // With no service running, the CLI replays itself, to this checkpoint file.
  const direct = { ...context(), runningService: async () => null };
  await expect(replayCommand(parseArgs(['ingress.received.v1', '--from', '0', '--checkpoint', ''], COMMANDS.replay.valued), direct)).rejects.toThrow(new UsageError('--checkpoint needs a value'));
  await expect(eventsCommand(parseArgs(['search', '--message-id='], COMMANDS.events.valued), context())).rejects.toThrow(new UsageError('--message-id needs a value'));
});
