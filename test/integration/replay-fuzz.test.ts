import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { LogRecord } from '../../services/platform/log/event-log';
import { replayOf } from '../../services/platform/log/replay-marking';
import { ADMIN_TOKENS, startAdminApi, type AdminApiHandle } from '../support/admin-api';
import { startTestApp, type TestApp } from '../support/app';
import { collectUntilQuiet } from '../support/log-reads';
import { caseSeed, fuzzSettings, prng, type Rng } from '../support/prng';

/**
 * Seeded, well-formed but edge-valued requests to the replay operations of the management API
 * (docs/management-api.md "Dead letters", "Replays", "Request journal"), on the embedded backends, with real
 * received and decoded records and real decoder dead letters in the log (the stages stopped once they are there):
 *
 * - every answer is a documented success or a 4xx in the API's error shape whose text names the field at fault;
 *   never 5xx, never a stack;
 * - a refused request appends nothing and starts no job;
 * - an accepted range replay appends exactly the originals its range and workflow select, once: the same range
 *   again (in any spelling) appends nothing; an accepted dead-letter replay appends one copy per original its filters
 *   select that no replay replayed before (the replay ledger), and one naming a letter of such an original is 409;
 * - every job ends complete, and none is left running.
 *
 * FUZZ_CASES (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE.
 */
const { seed: SEED, cases: CASES, only: ONLY_CASE } = fuzzSettings(150);
const codec = defaultAvroCodec();

let app: TestApp;
let api: AdminApiHandle;
/** The originals (no replay marks) of each topic, as the log holds them before any case. */
let originals: Record<string, LogRecord[]>;
let letters: LogRecord[];

beforeAll(async () => {
  app = await startTestApp('embedded', { ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0' }, ['receiver', 'decoder']);
  api = await startAdminApi(app);
  const { log } = app.backends;
  const hook = (id: string) => ({ id, active: true, nodes: [{ name: 'Hook', type: 'webhook', parameters: { authentication: 'none' } }, { name: 'Next', type: 'noop' }] });
  expect((await api.call('PUT', '/api/v1/workflows/wf-a', { body: hook('wf-a') })).status).toBe(201);
  expect((await api.call('PUT', '/api/v1/workflows/wf-dl', { body: hook('wf-dl') })).status).toBe(201);
  for (const [workflow, n] of [['wf-a', 3], ['wf-dl', 2]] as const) {
    for (let i = 0; i < n; i++) expect((await fetch(`${app.baseUrl}/hook/${workflow}`, { method: 'POST', body: `{"n":${i}}`, headers: { 'content-type': 'application/json' } })).status).toBeLessThan(300);
  }
  const received = await untilCount(app.topics.received, 5);
  // Real decoder dead letters: requests for a trigger node wf-dl does not have; one of them twice (two letters, one original).
  const orphan = (r: LogRecord, suffix: string) => ({ topic: app.topics.received, key: 'wf-dl', value: codec.encode('Received', { ...codec.decode('Received', r.value), requestId: `${codec.decode('Received', r.value).requestId}-${suffix}`, triggerNode: 'Gone' }) });
  const dl = received.filter((r) => codec.decode('Received', r.value).workflowId === 'wf-dl');
  await log.append([orphan(dl[0], 'gone'), orphan(dl[1], 'gone'), orphan(dl[0], 'gone')]);
  await untilCount(app.topics.deadLetter, 3);
  const decoded = await untilCount(app.topics.decoded, 5);
  await app.stopServices();
  // And two letters no decoder writes here: a dispatcher's (its source a real decoded record), a sampler's (never replayed).
  const source = (r: LogRecord) => ({ topic: r.topic, partition: r.partition, offset: String(r.offset), key: r.key === null ? null : Buffer.from(r.key), value: r.value, headers: r.headers });
  const letter = (stage: string, r: LogRecord) => ({
    topic: app.topics.deadLetter, key: 'wf-a',
    value: codec.encode('DeadLetter', { stage, errorCode: 'e', message: 'm', attempts: 1, failedAt: Date.now(), workflowId: 'wf-a', source: source(r) } as never),
  });
  await log.append([letter('dispatcher', decoded[0]), letter('sampler', { ...decoded[1], topic: app.topics.executions })]);
  originals = Object.fromEntries(await Promise.all([app.topics.received, app.topics.decoded].map(async (t) => [t, (await everything(t)).filter((r) => replayOf(r.headers) === null)])));
  letters = await everything(app.topics.deadLetter);
  expect(letters).toHaveLength(5);
}, 120_000);
afterAll(async () => { await api?.stop(); await app?.stop(); });

const everything = (topic: string) => collectUntilQuiet(app.backends.log, topic, 200, 300);
async function untilCount(topic: string, n: number): Promise<LogRecord[]> {
  for (const deadline = Date.now() + 30_000; ;) {
    const records = await everything(topic);
    if (records.length >= n) return records;
    if (Date.now() > deadline) throw new Error(`${topic} holds ${records.length} records, not ${n}, after 30 s`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Values: each either one the docs accept (with what it means) or one they refuse.

type Value = { text: unknown; ok: true; position?: { offset: bigint } | { time: number } } | { text: unknown; ok: false };
const ABSENT = Symbol('absent');

const pad = (n: number, w = 2) => String(Math.abs(n)).padStart(w, '0');
/** An instant in one of its RFC 3339 spellings: Z or an offset, a fraction cut or padded, t and z in either case. */
function timeText(rng: Rng, at: number): string {
  const minutes = rng.pick([0, 0, 60, -300, 330, -(23 * 60 + 59), 23 * 60 + 59, 45]);
  const local = new Date(at + minutes * 60_000);
  const base = `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}${rng.pick(['T', 't'])}${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}`;
  const ms = local.getUTCMilliseconds();
  const fraction = ms === 0 && rng.chance(0.5) ? '' : `.${pad(ms, 3)}${rng.pick(['', '0', '999', '000000', '5'])}`;
  const zone = minutes === 0 ? rng.pick(['Z', 'z', '+00:00', '-00:00']) : `${minutes < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(minutes) / 60))}:${pad(Math.abs(minutes) % 60)}`;
  return `${base}${fraction}${zone}`;
}

const BAD_TIMES = [
  '2026-11-22T05:00:00', '2026-11-22 05:00:00Z', '2026-02-29', '2026-02-30T00:00:00Z', '2026-11-22T23:59:60Z', '2026-11-22T24:00:00Z', '2026-11-22T05:00:00+24:00',
  '2026-11-22T05:00Z', '2026-13-01', '+002026-11-22T05:00:00Z', '-000001-01-01T00:00:00Z', '2026-11-22T05:00:00.Z', '2026-11-22T05:00:00,5Z', 'yesterday', 'now', '', ' ', '1e3', '0x10', '-1', '1.5', 'é',
];

/** A position (`from`, `to`): an offset (a JSON number or a string), an instant, or something refused. */
function position(rng: Rng, times: number[], offsets: number): Value {
  switch (rng.int(0, 9)) {
    case 0: case 1: {
      const offset = rng.pick([0, 1, 2, offsets - 1, offsets, offsets + 5, rng.int(0, offsets)]);
      return { text: rng.pick([offset, String(offset), `00${offset}`]), ok: true, position: { offset: BigInt(offset) } };
    }
    case 2: {
      const huge = rng.pick(['99999999999999999999', '18446744073709551616', `${2 ** 53}`]);
      return { text: huge, ok: true, position: { offset: BigInt(huge) } };
    }
    case 3: case 4: case 5: {
      const at = rng.pick(times) + rng.pick([0, 0, -1, 1, -1000, 1000]);
      return { text: timeText(rng, at), ok: true, position: { time: at } };
    }
    case 6: {
      // Far in the past or the future, in a spelling whose year is four digits: a few of them name an instant outside 0000-9999 in UTC.
      const text = rng.pick(['1970-01-01T00:00:00Z', '0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', '2100-01-01T00:00:00+01:00', '1900-06-01T00:00:00.5-05:30', '9999-12-31T23:59:59-23:59', '0000-01-01T00:00:00+00:01']);
      const at = Date.parse(text);
      // Kept as its instant in UTC, which must read back: refused outside the years 0000 to 9999 there (times.ts).
      if (at < Date.parse('0000-01-01T00:00:00Z') || at > Date.parse('9999-12-31T23:59:59.999Z')) return { text, ok: false };
      return { text, ok: true, position: { time: at } };
    }
    case 7: {
      // The date alone: its midnight UTC.
      const day = rng.pick(['2026-11-22', '1970-01-01', '2000-02-29', '9999-12-31', '0000-01-01']);
      return { text: day, ok: true, position: { time: Date.parse(`${day.startsWith('0000') ? '+000000' + day.slice(4) : day}T00:00:00Z`) } };
    }
    case 8: return { text: rng.pick([-1, 1.5, 2 ** 53, 1e308, -0.5, true, false, [], {}, [0], { offset: 0 }]), ok: false };
    default: return { text: rng.pick(BAD_TIMES), ok: false };
  }
}

// ---------------------------------------------------------------------------------------------------------------

interface Outcome { status: number; body: any; text: string }

/** A body as text: sometimes with the first field given twice (JSON.parse keeps the last, which is what counts). */
function bodyText(rng: Rng, fields: Record<string, unknown>): string {
  const text = JSON.stringify(fields);
  const keys = Object.keys(fields);
  if (keys.length === 0 || !rng.chance(0.15)) return text;
  return `{${JSON.stringify(keys[0])}:${JSON.stringify(rng.pick(['junk', 17, null, [1]]))},${text.slice(1)}`;
}

async function post(path: string, body: string | null): Promise<Outcome> {
  return api.call('POST', path, body === null ? {} : { body });
}

const state = {
  rangeJobs: new Set<string>(),
  /** The originals (`request <id>`) some dead-letter replay has appended a copy of. */
  replayedOriginals: new Set<string>(),
  jobs: 0,
};

const requestOf = (r: LogRecord) => {
  const name = codec.nameOf(r.value);
  return `request ${(codec.decode(name as 'Received', r.value) as { requestId: string }).requestId}`;
};

/** Copies appended by replays: all the stage input topics hold beyond their originals (nothing else writes to them now). */
async function copies(): Promise<number> {
  let n = 0;
  for (const topic of [app.topics.received, app.topics.decoded]) {
    for (const p of await app.backends.log.endOffsets(topic)) n += Number(p.offset);
    n -= originals[topic].length;
  }
  return n;
}

async function settled(id: string): Promise<any> {
  for (const deadline = Date.now() + 20_000; ;) {
    const job = (await api.call('GET', `/api/v1/replays/${id}`)).body;
    if (job.state !== 'running') return job;
    if (Date.now() > deadline) throw new Error(`replay ${id} still running after 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** No 5xx, no stack, the error shape on a refusal. */
function checkAnswer(out: Outcome, what: string): void {
  expect({ what, status: out.status }).toEqual({ what, status: expect.any(Number) });
  if (out.status >= 500) throw new Error(`${what}: ${out.status} ${out.text}`);
  expect(out.text).not.toMatch(/\n\s+at |TypeError|ReferenceError|RangeError|SyntaxError|undefined|NaN/);
  if (out.status >= 400) expect(out.body).toEqual(expect.objectContaining({ error: expect.any(String), message: expect.any(String) }));
}

/** The refusal names `field`, or one of `fields` (in its message or problems): a request with several faults may be refused for any. */
function namesField(out: Outcome, field: string | string[], what: string): void {
  const said = `${out.body.message} ${(out.body.problems ?? []).join(' ')}`;
  const fields = typeof field === 'string' ? [field] : field;
  if (!fields.some((f) => said.includes(f))) throw new Error(`${what}: refused without naming ${fields.join(' or ')}: ${out.text}`);
}

function selectRange(topic: string, from: Value & { ok: true }, to: (Value & { ok: true }) | null, workflow: string | null): number {
  return originals[topic].filter((r) => {
    const f = from.position!;
    if ('offset' in f ? BigInt(r.offset) < f.offset : r.timestamp < f.time) return false;
    const t = to?.position;
    if (t && ('offset' in t ? BigInt(r.offset) > t.offset : r.timestamp >= t.time)) return false;
    return workflow === null || (codec.decode(codec.nameOf(r.value) as 'Received', r.value) as { workflowId: string }).workflowId === workflow;
  }).length;
}

async function rangeCase(rng: Rng, what: string): Promise<void> {
  const times = Object.values(originals).flat().map((r) => r.timestamp);
  const topicChoice = rng.pick<[unknown, boolean]>([[app.topics.received, true], [app.topics.received, true], [app.topics.decoded, true], [app.topics.deadLetter, false], [app.topics.executions, false], ['nope', false], ['', false], [5, false], [null, false]]);
  const topic = topicChoice[0] as string;
  const offsets = typeof topic === 'string' && originals[topic] ? originals[topic].length : 5;
  const from: Value | typeof ABSENT = rng.chance(0.05) ? ABSENT : position(rng, times, offsets);
  const to: Value | typeof ABSENT = rng.chance(0.4) ? ABSENT : position(rng, times, offsets);
  const workflowChoice = rng.pick<[unknown, boolean]>([[ABSENT, true], [ABSENT, true], ['wf-a', true], ['wf-dl', true], ['nope', true], ['', false], [7, false], [['wf-a'], false], [null, true]]);
  const extra = rng.chance(0.1) ? rng.pick(['stage', 'letters', 'From', 'cursor', 'limit', 'partition']) : null;
  const unknownCopies = rng.chance(0.1) ? rng.pick<[unknown, boolean]>([['skip', true], ['append', true], ['drop', false], [1, false]]) : null;
  const fields: Record<string, unknown> = {};
  if (rng.chance(0.95) || !topicChoice[1]) fields.topic = topicChoice[0];
  if (from !== ABSENT) fields.from = from.text;
  if (to !== ABSENT) fields.to = to.text;
  if (workflowChoice[0] !== ABSENT) fields.workflow = workflowChoice[0];
  if (extra) fields[extra] = rng.pick([1, 'x', null]);
  if (unknownCopies) fields.unknownCopies = unknownCopies[0];
  // What is at fault, in the order nothing else hides it.
  const faults: string[] = [];
  if (!('topic' in fields) || topicChoice[0] === null || topicChoice[0] === '') faults.push('topic');
  else if (!topicChoice[1]) faults.push('topic');
  if (from === ABSENT || !from.ok) faults.push('from');
  if (to !== ABSENT && !to.ok) faults.push('to');
  if (!workflowChoice[1]) faults.push('workflow');
  if (extra) faults.push(extra);
  if (unknownCopies && !unknownCopies[1]) faults.push('unknownCopies');

  const jobsBefore = (await api.call('GET', '/api/v1/replays')).body.replays.length;
  const copiesBefore = await copies();
  const out = await post('/api/v1/replays', bodyText(rng, fields));
  checkAnswer(out, what);
  if (faults.length > 0) {
    if (out.status !== 400) throw new Error(`${what}: ${JSON.stringify(fields)} has faults (${faults.join(', ')}) but was answered ${out.status} ${out.text}`);
    namesField(out, faults, what);
  } else {
    const f = from as Value & { ok: true };
    const t = to === ABSENT ? null : to as Value & { ok: true };
    const reversed = t !== null && ('offset' in f.position! && 'offset' in t.position! ? f.position.offset > t.position.offset
      : 'time' in f.position! && 'time' in t.position! && f.position.time >= t.position.time);
    if (reversed) {
      expect({ what, status: out.status }).toEqual({ what, status: 400 });
      namesField(out, 'from', what);
      namesField(out, 'to', what);
    } else {
      if (out.status !== 200 && out.status !== 202) throw new Error(`${what}: ${JSON.stringify(fields)} is a valid range replay but was answered ${out.status} ${out.text}`);
      const again = state.rangeJobs.has(out.body.id);
      expect({ what, status: out.status }).toEqual({ what, status: again ? 200 : 202 });
      const job = await settled(out.body.id);
      expect({ what, state: job.state, error: job.error }).toEqual({ what, state: 'complete', error: null });
      const expected = again ? 0 : selectRange(topic, f, t, typeof workflowChoice[0] === 'string' ? workflowChoice[0] : null);
      expect({ what, appended: (await copies()) - copiesBefore }).toEqual({ what, appended: expected });
      expect({ what, replayed: job.replayed }).toEqual({ what, replayed: selectRange(topic, f, t, typeof workflowChoice[0] === 'string' ? workflowChoice[0] : null) });
      state.rangeJobs.add(out.body.id);
      // Resumed once complete: nothing more.
      const resumed = await post(`/api/v1/replays/${out.body.id}/resume`, null);
      expect({ what, status: resumed.status, state: resumed.body.state }).toEqual({ what, status: 200, state: 'complete' });
      expect({ what, appended: (await copies()) - copiesBefore }).toEqual({ what, appended: expected });
      return;
    }
  }
  // Refused: no job, no record.
  expect({ what, jobs: (await api.call('GET', '/api/v1/replays')).body.replays.length, copies: await copies() }).toEqual({ what, jobs: jobsBefore, copies: copiesBefore });
}

async function deadLetterCase(rng: Rng, what: string): Promise<void> {
  const times = letters.map((r) => r.timestamp);
  const stage = rng.pick<[unknown, boolean]>([[ABSENT, true], [ABSENT, true], ['decoder', true], ['dispatcher', true], ['sampler', true], ['mdn', true], ['Decoder', false], ['bogus', false], ['', false], [3, false], [null, true]]);
  const workflow = rng.pick<[unknown, boolean]>([[ABSENT, true], [ABSENT, true], ['wf-dl', true], ['wf-a', true], ['nope', true], ['', false], [[], false], [null, true]]);
  const since: Value | typeof ABSENT = rng.chance(0.6) ? ABSENT : position(rng, times, letters.length);
  const named = rng.pick<[unknown, boolean, string[] | null]>([
    [ABSENT, true, null], [ABSENT, true, null], [null, true, null],
    ...(() => {
      const some = letters.filter(() => rng.chance(0.5)).map((r) => `${r.partition}/${rng.chance(0.3) ? `00${r.offset}` : r.offset}`);
      return some.length ? [[some, true, some] as [unknown, boolean, string[]], [[...some, some[0]], true, some] as [unknown, boolean, string[]]] : [];
    })(),
    // Positions the dead-letter topic does not have (no partition 7; past the end; past a 64-bit offset): refused up front.
    [['7/0'], false, null], [['0/99999999'], false, null], [['0/9999999999999999999'], false, null], [[`${letters[0].partition}/${letters[0].offset}`, '0/99999999'], false, null],
    [[], false, null], [['x'], false, null], [['0/-1'], false, null], [['0/1.5'], false, null], [[0], false, null], ['0/1', false, null], [[' 0/1'], false, null], [['1234567890/0'], false, null],
  ]);
  const extra = rng.chance(0.1) ? rng.pick(['topic', 'from', 'Letters', 'limit', 'cursor']) : null;
  const fields: Record<string, unknown> = {};
  if (stage[0] !== ABSENT) fields.stage = stage[0];
  if (workflow[0] !== ABSENT) fields.workflow = workflow[0];
  if (since !== ABSENT) fields.since = since.text;
  if (named[0] !== ABSENT) fields.letters = named[0];
  if (extra) fields[extra] = 1;
  const sinceOk = since === ABSENT || (since.ok && 'time' in since.position! && typeof since.text === 'string');
  const faults: string[] = [];
  if (!stage[1]) faults.push('stage');
  if (!workflow[1]) faults.push('workflow');
  if (!sinceOk) faults.push('since');
  if (!named[1]) faults.push('letters');
  if (extra) faults.push(extra);

  const jobsBefore = (await api.call('GET', '/api/v1/replays')).body.replays.length;
  const copiesBefore = await copies();
  const out = await post('/api/v1/dead-letters/replay', rng.chance(0.05) && Object.keys(fields).length === 0 ? null : bodyText(rng, fields));
  checkAnswer(out, what);
  if (faults.length > 0) {
    if (out.status !== 400) throw new Error(`${what}: ${JSON.stringify(fields)} has faults (${faults.join(', ')}) but was answered ${out.status} ${out.text}`);
    namesField(out, faults, what);
  } else {
    const sinceAt = since === ABSENT ? null : (since as { position: { time: number } }).position.time;
    const positions = named[2] === null ? null : new Set(named[2].map((p) => `${Number(p.split('/')[0])}/${BigInt(p.split('/')[1])}`));
    const chosen = letters.filter((r) => {
      const letter = codec.decode('DeadLetter', r.value);
      if (positions && !positions.has(`${r.partition}/${r.offset}`)) return false;
      if (typeof stage[0] === 'string' && letter.stage !== stage[0]) return false;
      if (typeof workflow[0] === 'string' && letter.workflowId !== workflow[0]) return false;
      return sinceAt === null || r.timestamp >= sinceAt;
    });
    const selected = chosen.filter((r) => [app.topics.received, app.topics.decoded].includes(codec.decode('DeadLetter', r.value).source.topic));
    // The named letters the filters leave out: the job says which, rather than completing silent about them.
    const notFound = positions === null ? [] : [...positions].filter((p) => !chosen.some((r) => `${r.partition}/${r.offset}` === p));
    const originalsOf = selected.map((r) => requestOf({ value: codec.decode('DeadLetter', r.value).source.value } as LogRecord));
    if (positions && originalsOf.some((o) => state.replayedOriginals.has(o))) {
      expect({ what, status: out.status, error: out.body.error }).toEqual({ what, status: 409, error: 'conflict' });
    } else {
      expect({ what, status: out.status }).toEqual({ what, status: 202 });
      const job = await settled(out.body.id);
      const fresh = [...new Set(originalsOf)].filter((o) => !state.replayedOriginals.has(o));
      expect({ what, state: job.state, error: job.error, replayed: job.replayed }).toEqual({ what, state: 'complete', error: null, replayed: fresh.length });
      expect({ what, appended: (await copies()) - copiesBefore }).toEqual({ what, appended: fresh.length });
      expect({ what, duplicates: job.duplicates }).toEqual({ what, duplicates: originalsOf.length - fresh.length });
      expect({ what, lettersNotFound: [...job.lettersNotFound].sort() }).toEqual({ what, lettersNotFound: notFound.sort() });
      for (const o of fresh) state.replayedOriginals.add(o);
      return;
    }
  }
  expect({ what, jobs: (await api.call('GET', '/api/v1/replays')).body.replays.length, copies: await copies() }).toEqual({ what, jobs: jobsBefore, copies: copiesBefore });
}

/** Queries of the listing routes and the journal: 200, or 400 naming the parameter. */
async function queryCase(rng: Rng, what: string): Promise<void> {
  const [path, names] = rng.pick<[string, string[]]>([
    ['/api/v1/dead-letters', ['stage', 'workflow', 'since', 'limit', 'withSource']],
    ['/api/v1/events', ['workflow', 'messageId', 'postId', 'trackingId', 'since', 'until', 'limit']],
  ]);
  const values: Record<string, string[]> = {
    stage: ['decoder', 'dispatcher', 'bogus', ''], workflow: ['wf-a', 'nope', ''], messageId: ['m'], postId: ['p'], trackingId: ['t'],
    since: ['2026-11-22T05:00:00Z', '2026-11-22T06:00:00.250+01:00', '0', '8640000000000001', '99999999999999999999', '2026-11-22T23:59:60Z', '2026-11-22', '9999-12-31T23:59:59-23:59', 'soon', ''],
    until: ['2026-11-22T05:00:00Z', '0', '1', 'soon', ''], limit: ['1', '0', '1000', '1001', '-1', '1.5', '1e3', '0x10', '99999999999999999999', ''], withSource: ['true', 'false', 'yes', ''],
  };
  const pairs: Array<[string, string]> = [];
  for (let i = rng.int(0, 3); i > 0; i--) {
    const name = rng.chance(0.1) ? rng.pick(['cursor', 'offset', 'Limit', 'stages']) : rng.pick(names);
    pairs.push([name, rng.pick(values[name] ?? ['1'])]);
  }
  if (pairs.length && rng.chance(0.15)) pairs.push([pairs[0][0], pairs[0][1]]);
  const query = pairs.map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`).join('&');
  const out = await api.call('GET', `${path}${query ? `?${query}` : ''}`);
  checkAnswer(out, what);
  if (out.status === 200) return;
  expect({ what, status: out.status }).toEqual({ what, status: 400 });
  if (!pairs.some(([n]) => `${out.body.message}`.includes(n))) throw new Error(`${what}: ${query} refused without naming a parameter: ${out.text}`);
}

/** Ids of jobs that are malformed, unknown, or another job's; cancel and resume bodies of the wrong shape. */
async function jobIdCase(rng: Rng, what: string): Promise<void> {
  const known = [...state.rangeJobs];
  const id = rng.pick(['x', 'dl-0000000000000000', 'constructor', '__proto__', '%2e%2e', 'a'.repeat(65), '-', ...(known.length ? [known[0], `${known[0]}x`, known[0].toUpperCase()] : [])]);
  const [method, suffix] = rng.pick([['GET', ''], ['POST', '/cancel'], ['POST', '/resume']]);
  const body = method === 'POST' && rng.chance(0.5) ? rng.pick(['{}', '{"unknownCopies":"skip"}', '{"unknownCopies":null}', '{"unknownCopies":"drop"}', '{"from":0}', '[]', '"x"', 'null', '7']) : null;
  const copiesBefore = await copies();
  const out = await api.call(method, `/api/v1/replays/${id}${suffix}`, body === null ? {} : { body });
  checkAnswer(out, what);
  if (out.status < 300) {
    expect({ what, id: out.body.id }).toEqual({ what, id });
    expect({ what, appended: (await copies()) - copiesBefore }).toEqual({ what, appended: 0 });
  } else if (![400, 404].includes(out.status)) throw new Error(`${what}: ${method} ${id}${suffix} ${body ?? ''} answered ${out.status} ${out.text}`);
}

test(`replay, dead-letter replay, listing and journal requests with edge values (seed ${SEED}, ${CASES} cases)`, async () => {
  for (let n = 0; n < CASES; n++) {
    if (ONLY_CASE !== null && n !== ONLY_CASE) continue;
    const rng = prng(caseSeed(SEED, n));
    const what = `seed ${SEED} case ${n} (FUZZ_SEED=${SEED} FUZZ_CASE=${n})`;
    const kind = rng.int(0, 9);
    if (kind < 4) await rangeCase(rng, what);
    else if (kind < 7) await deadLetterCase(rng, what);
    else if (kind < 9) await queryCase(rng, what);
    else await jobIdCase(rng, what);
  }
  // No claim left held: every dead letter replayed by filters ends, with one copy of each original no replay made.
  const copiesBefore = await copies();
  const all = await post('/api/v1/dead-letters/replay', '{}');
  expect(all.status).toBe(202);
  const sources = letters.map((r) => codec.decode('DeadLetter', r.value).source).filter((s) => [app.topics.received, app.topics.decoded].includes(s.topic));
  const fresh = new Set(sources.map((s) => requestOf({ value: s.value } as LogRecord)).filter((o) => !state.replayedOriginals.has(o)));
  expect(await settled(all.body.id)).toMatchObject({ state: 'complete', replayed: fresh.size, waitingOn: null });
  expect((await copies()) - copiesBefore).toBe(fresh.size);
  // Nothing left running.
  const replays = (await api.call('GET', '/api/v1/replays')).body.replays as any[];
  expect(replays.filter((j) => j.state !== 'complete')).toEqual([]);
  expect(JSON.stringify(app.logs)).not.toMatch(/admin api: request failed/);
}, 300_000);
