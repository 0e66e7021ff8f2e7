// The operator console (docs/management-api.md#console). Every datum comes from the management API, called
// with the admin token the operator typed in, kept in this tab's sessionStorage only (never in the URL, a
// cookie or localStorage).
//
// Payloads are hostile: the DOM is built with createElement and textContent only, JSON is shown through
// JSON.stringify into a <pre>, and a link is made only for an http(s) URL. The page's CSP forbids inline
// script and style anyway; this file is what makes data never become markup in the first place.

const TOKEN_KEY = 'ingress-console-token';
const VIEWS = { workflows: workflowsView, events: eventsView, 'dead-letters': deadLettersView, certificates: certificatesView };
const DEFAULT_WARNING_DAYS = 14;
const REPLAY_POLL_MS = 500;

let caller = null; // { name, scope } of the token, from /api/v1/whoami

// ---- DOM helpers: text only ------------------------------------------------------------------------------

/** An element with fixed attributes (names from this file, never from data) and children (nodes or text). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') node.className = value;
    else if (name === 'disabled' || name === 'hidden') node[name] = Boolean(value);
    else node.setAttribute(name, String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** JSON as text, in a <pre>: whatever the payload holds is shown, never parsed as HTML. */
function jsonBlock(value) {
  const pre = el('pre', { class: 'json' });
  pre.textContent = JSON.stringify(value, null, 2);
  return pre;
}

/** A link only for an absolute http(s) URL; anything else (javascript:, data:, relative) stays text. */
function safeLink(url, text) {
  let parsed = null;
  try { parsed = new URL(String(url)); } catch { parsed = null; }
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) return el('span', { class: 'unlinked' }, String(text ?? url));
  return el('a', { href: parsed.href, target: '_blank', rel: 'noopener noreferrer' }, String(text ?? url));
}

function table(headings, rows, attributes = {}) {
  return el('table', attributes,
    el('thead', {}, el('tr', {}, headings.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows));
}

const cell = (...children) => el('td', {}, ...children);
/** A class for a journal kind, from its letters only: a kind is data too. */
const kindClass = (kind) => `state state-${String(kind).replace(/[^a-z-]/g, '')}`;
const text = (value) => (value === null || value === undefined || value === '' ? '—' : String(value));
/** Times as ISO text, whether the API gave an ISO string or epoch milliseconds (sample data's receivedAt). */
const when = (value) => (typeof value === 'number' && Number.isFinite(value) ? new Date(value).toISOString() : text(value));

function showView(...children) {
  const main = document.getElementById('view');
  main.replaceChildren();
  append(main, children);
  return main;
}

function notice(kind, message, id) {
  return el('p', { class: `banner ${kind}`, role: kind === 'error' ? 'alert' : 'status', id }, message);
}

// ---- The API ---------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message, problems) {
    super(message);
    this.status = status;
    this.code = code;
    this.problems = Array.isArray(problems) ? problems.map(String) : [];
  }
}

async function api(method, path, body) {
  const headers = { authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) ?? ''}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'omit', cache: 'no-store' });
  } catch (error) {
    throw new ApiError(0, 'unreachable', `The management API did not answer: ${error.message}`);
  }
  let data = null;
  try { data = await res.json(); } catch { data = null; }
  if (!res.ok) throw new ApiError(res.status, data?.error ?? `http-${res.status}`, data?.message ?? res.statusText, data?.problems);
  return data;
}

/** 401 and 403 other than a read token writing: the token is wrong or missing, so ask for another. */
function isAuthFailure(error) {
  return error instanceof ApiError && (error.status === 401 || (error.status === 403 && error.code !== 'scope-insufficient'));
}

function describe(error) {
  if (error instanceof ApiError) return error.status ? `${error.status} ${error.code}: ${error.message}` : error.message;
  return String(error?.message ?? error);
}

/** An error of a view: an auth failure goes to the banner above the token form; others are shown in place. */
function failure(error) {
  if (isAuthFailure(error)) {
    askForToken(`The API refused the token: ${describe(error)}`);
    return notice('error', `Not authorised: ${describe(error)}`, 'view-error');
  }
  return notice('error', describe(error), 'view-error');
}

// ---- Token and navigation --------------------------------------------------------------------------------

function askForToken(reason) {
  caller = null;
  const banner = document.getElementById('auth-error');
  banner.textContent = reason ?? '';
  banner.hidden = !reason;
  document.getElementById('token-form').hidden = false;
  document.getElementById('nav').hidden = true;
  document.getElementById('session').hidden = true;
  if (!reason) showView();
  document.getElementById('token-input').focus();
}

async function signIn() {
  try {
    caller = await api('GET', '/api/v1/whoami');
  } catch (error) {
    if (isAuthFailure(error)) askForToken(`The API refused the token: ${describe(error)}`);
    else showView(failure(error));
    return;
  }
  document.getElementById('auth-error').hidden = true;
  document.getElementById('token-form').hidden = true;
  document.getElementById('nav').hidden = false;
  document.getElementById('session').hidden = false;
  document.getElementById('caller').textContent = `Token "${caller.name}", scope ${caller.scope}`;
  await route();
}

async function route() {
  if (!caller) return;
  const name = location.hash.replace(/^#/, '') || 'workflows';
  const view = VIEWS[name] ?? VIEWS.workflows;
  for (const link of document.querySelectorAll('#nav a')) link.classList.toggle('current', link.dataset.view === name);
  document.getElementById('view').dataset.view = name;
  showView(el('p', { class: 'loading' }, 'Loading…'));
  await view();
}

// ---- Workflows: hook URLs and the latest sample per trigger node -------------------------------------------

async function workflowsView() {
  let workflows;
  try { workflows = (await api('GET', '/api/v1/workflows')).workflows; } catch (error) { showView(failure(error)); return; }
  const samples = el('section', { id: 'samples' });
  const rows = workflows.map((w) => el('tr', { 'data-workflow': w.id },
    cell(el('code', {}, w.id)),
    cell(text(w.name)),
    cell(w.active ? 'active' : 'inactive'),
    cell(el('code', { class: 'hook-url' }, w.url)),
    cell(w.triggers.map((t) => el('div', {}, `${t.name} (${t.type})${t.disabled ? ', disabled' : ''}`))),
    cell(el('button', { type: 'button', class: 'show-samples' }, 'Latest samples')),
  ));
  rows.forEach((row, i) => row.querySelector('button').addEventListener('click', () => showSamples(workflows[i].id, samples)));
  showView(
    el('h2', {}, 'Workflows'),
    el('p', { class: 'hint' }, 'Partners POST to the hook URL (PUBLIC_BASE_URL/hook/{id}, with an optional /suffix).'),
    workflows.length ? table(['id', 'name', 'state', 'hook URL', 'trigger nodes', ''], rows, { id: 'workflows' }) : notice('info', 'No workflows yet.'),
    samples,
  );
}

async function showSamples(workflowId, into) {
  into.replaceChildren(el('p', { class: 'loading' }, 'Loading…'));
  let answer;
  try { answer = await api('GET', `/api/v1/workflows/${encodeURIComponent(workflowId)}/samples`); } catch (error) { into.replaceChildren(failure(error)); return; }
  into.replaceChildren(
    el('h3', {}, 'Latest sample data of ', el('code', {}, answer.workflowId)),
    ...answer.nodes.map((n) => {
      const latest = n.samples[0];
      return el('article', { class: 'sample', 'data-node': n.node },
        el('h4', {}, `${n.node} (${n.type})`),
        latest
          ? [el('p', {}, `received ${when(latest.receivedAt)}, execution ${text(latest.executionId)}; ${n.samples.length} kept`), jsonBlock(latest.data)]
          : el('p', { class: 'hint' }, 'No sample data yet.'),
      );
    }),
  );
}

// ---- Events: recent requests per workflow and the journey of one (the request journal) --------------------

/** The journal's answers: `{requestId, entries}` for a journey, `{events}` for a search. */
function entriesOf(answer) {
  return answer?.entries ?? answer?.events ?? [];
}

/** The events routes are not served by this service (an older build, or none with the journal): say so. */
function journalMissing(error) {
  return error instanceof ApiError && error.status === 404 && /^No route /.test(error.message);
}

function journalUnavailable() {
  return notice('warning', 'Journal not available: this service does not serve the request journal (GET /api/v1/events). See docs/request-journal.md.', 'journal-unavailable');
}

async function eventsView() {
  let workflows;
  try { workflows = (await api('GET', '/api/v1/workflows')).workflows; } catch (error) { showView(failure(error)); return; }
  const select = el('select', { id: 'events-workflow' }, workflows.map((w) => el('option', { value: w.id }, w.id)));
  const requestInput = el('input', { id: 'request-id', type: 'text', placeholder: 'X-Request-Id', spellcheck: 'false' });
  const list = el('section', { id: 'recent-events' });
  const journey = el('section', { id: 'journey' });
  const load = () => recentEvents(select.value, list, journey);
  const byId = () => { if (requestInput.value.trim()) showJourney(requestInput.value.trim(), journey); };
  showView(
    el('h2', {}, 'Events'),
    el('div', { class: 'controls' },
      el('label', {}, 'Workflow ', select), el('button', { type: 'button', id: 'load-events' }, 'Recent requests'),
      el('label', {}, 'Request id ', requestInput), el('button', { type: 'button', id: 'show-journey' }, 'Journey')),
    list, journey,
  );
  document.getElementById('load-events').addEventListener('click', load);
  document.getElementById('show-journey').addEventListener('click', byId);
  if (workflows.length) await load();
}

async function recentEvents(workflowId, into, journey) {
  into.replaceChildren(el('p', { class: 'loading' }, 'Loading…'));
  let entries;
  try {
    entries = entriesOf(await api('GET', `/api/v1/events?workflow=${encodeURIComponent(workflowId)}&limit=200`));
  } catch (error) {
    into.replaceChildren(journalMissing(error) ? journalUnavailable() : failure(error));
    return;
  }
  // Newest first from the API; a request's state is what last happened to it.
  const requests = new Map();
  for (const e of entries) {
    const r = requests.get(e.requestId) ?? { requestId: e.requestId, state: e.kind, last: e.at, first: e.at, count: 0 };
    r.first = e.at;
    r.count++;
    requests.set(e.requestId, r);
  }
  const rows = [...requests.values()].map((r) => {
    const button = el('button', { type: 'button', class: 'request-link' }, r.requestId);
    button.addEventListener('click', () => showJourney(r.requestId, journey));
    return el('tr', { 'data-request': r.requestId }, cell(button), cell(el('span', { class: kindClass(r.state) }, r.state)), cell(r.last), cell(r.first), cell(String(r.count)));
  });
  into.replaceChildren(
    el('h3', {}, 'Recent requests of ', el('code', {}, workflowId)),
    rows.length ? table(['request id', 'state', 'last event', 'first event', 'entries'], rows, { id: 'requests' }) : notice('info', 'No journal entries for this workflow yet.'),
  );
}

async function showJourney(requestId, into) {
  into.replaceChildren(el('p', { class: 'loading' }, 'Loading…'));
  let entries;
  try {
    entries = entriesOf(await api('GET', `/api/v1/events/${encodeURIComponent(requestId)}`));
  } catch (error) {
    if (journalMissing(error)) into.replaceChildren(journalUnavailable());
    // The journal has nothing for that id: an answer, not a failure.
    else if (error instanceof ApiError && error.status === 404) into.replaceChildren(notice('info', error.message, 'journal-none'));
    else into.replaceChildren(failure(error));
    return;
  }
  const rows = entries.map((e) => el('tr', { 'data-kind': e.kind },
    cell(e.at),
    cell(el('span', { class: kindClass(e.kind) }, e.kind)),
    cell(el('code', { class: 'trace-id' }, text(e.traceId)), e.traceUrl ? [' ', safeLink(e.traceUrl, 'trace')] : null),
    cell(text(e.replayOf)),
    cell(jsonBlock(e.detail ?? null)),
  ));
  into.replaceChildren(
    el('h3', {}, 'Journey of ', el('code', {}, requestId)),
    rows.length ? table(['at', 'what', 'trace', 'replay of', 'detail'], rows, { id: 'journey-entries' }) : notice('info', 'No journal entries for this request.'),
  );
}

// ---- Dead letters and their replay -------------------------------------------------------------------------

async function deadLettersView() {
  let answer;
  try { answer = await api('GET', '/api/v1/dead-letters?limit=100'); } catch (error) { showView(failure(error)); return; }
  const canReplay = caller?.scope === 'full';
  const reason = `Replay needs a token with the full scope; token "${caller?.name}" has the ${caller?.scope} scope.`;
  const rows = answer.deadLetters.map((d) => {
    const position = `${d.partition}/${d.offset}`;
    const status = el('span', { class: 'replay-status' });
    const button = el('button', { type: 'button', class: 'replay', disabled: !canReplay, title: canReplay ? null : reason }, 'Replay');
    if (canReplay) button.addEventListener('click', () => replay(position, button, status));
    return el('tr', { 'data-letter': position },
      cell(text(d.failedAt)), cell(text(d.stage)), cell(text(d.code)), cell(el('code', {}, text(d.workflowId))),
      cell(el('code', {}, text(d.requestId))), cell(text(d.attempts)), cell(el('span', { class: 'message' }, text(d.message))),
      cell(el('code', {}, position)), cell(el('code', { class: 'replay-of' }, text(d.replayOf))), cell(button, status));
  });
  showView(
    el('h2', {}, 'Dead letters'),
    canReplay ? null : notice('info', reason, 'replay-disabled-reason'),
    el('p', { class: 'hint' }, `${answer.total} dead letter(s)${answer.truncated ? `, the newest ${answer.deadLetters.length} shown` : ''}. Replay sends one back into the stage it failed in, marked as a replay; fix its cause first. A request is replayed once: a letter of one already replayed is refused, unless that replay failed again and left it.`),
    rows.length ? table(['failed at', 'stage', 'code', 'workflow', 'request', 'attempts', 'message', 'position', 'replay of', ''], rows, { id: 'dead-letters' }) : notice('info', 'No dead letters.'),
  );
}

async function replay(position, button, status) {
  button.disabled = true;
  status.textContent = 'starting…';
  let job;
  try {
    job = await api('POST', '/api/v1/dead-letters/replay', { letters: [position] });
  } catch (error) {
    // A 409 names the replay that replays this letter's request: said, so the operator knows which letter to replay instead.
    status.textContent = `refused: ${describe(error)}${error.problems?.length ? ` ${error.problems.join('; ')}` : ''}`;
    button.disabled = false;
    if (isAuthFailure(error)) askForToken(`The API refused the token: ${describe(error)}`);
    return;
  }
  // The job runs in the service; follow it until it stops running.
  while (job.state === 'running') {
    status.textContent = `replay ${job.id}: running, ${job.replayed} replayed`;
    await new Promise((resolve) => setTimeout(resolve, REPLAY_POLL_MS));
    try { job = await api('GET', `/api/v1/replays/${encodeURIComponent(job.id)}`); } catch (error) { status.textContent = `replay ${job.id}: ${describe(error)}`; return; }
  }
  status.dataset.state = job.state;
  // A replay that did not complete may be tried again; a complete one is not offered twice.
  if (job.state !== 'complete') button.disabled = false;
  status.textContent = `replay ${job.id}: ${job.state}, ${job.replayed} replayed, ${job.skipped} skipped${job.duplicates ? ` (${job.duplicates} already replayed)` : ''}${job.unrecorded ? ` (${job.unrecorded} not replayed: the replay ledger is full, REPLAY_LEDGER_MAX_ORIGINALS)` : ''}${job.unknownCopies ? ` (${job.unknownCopies} not replayed: their copies may have been appended before retention deleted them, unknownCopies: skip)` : ''}${job.lettersNotFound?.length ? ` (not among the dead letters selected: ${job.lettersNotFound.join(', ')})` : ''}${job.error ? ` (${job.error})` : ''}`;
}

// ---- Certificates near expiry ------------------------------------------------------------------------------

async function certificatesView() {
  const within = el('input', { id: 'within-days', type: 'number', min: '0', max: '3650', value: '30' });
  const warning = el('input', { id: 'warning-days', type: 'number', min: '0', max: '3650', value: String(DEFAULT_WARNING_DAYS) });
  const list = el('section', { id: 'certificate-list' });
  const load = () => certificates(Number(within.value), Number(warning.value), list);
  const button = el('button', { type: 'button', id: 'load-certificates' }, 'Show');
  button.addEventListener('click', load);
  showView(
    el('h2', {}, 'Certificates near expiry'),
    el('div', { class: 'controls' }, el('label', {}, 'Expiring within (days) ', within), el('label', {}, 'Warn under (days) ', warning), button),
    list,
  );
  await load();
}

async function certificates(withinDays, warningDays, into) {
  into.replaceChildren(el('p', { class: 'loading' }, 'Loading…'));
  let answer;
  try { answer = await api('GET', `/api/v1/certificates?withinDays=${encodeURIComponent(withinDays)}`); } catch (error) { into.replaceChildren(failure(error)); return; }
  const sorted = [...answer.certificates].sort((a, b) => a.daysToExpiry - b.daysToExpiry);
  const rows = sorted.map((c) => {
    const warn = c.daysToExpiry < warningDays;
    const days = c.daysToExpiry < 0 ? `expired ${-c.daysToExpiry} day(s) ago` : `${c.daysToExpiry}`;
    return el('tr', { class: warn ? 'warn' : null, 'data-fingerprint': c.fingerprint },
      cell(el('code', {}, text(c.credentialId))), cell(text(c.role)), cell(text(c.subject)),
      cell(el('code', { class: 'fingerprint' }, text(c.fingerprint))), cell(text(c.notAfter)),
      cell(el('span', { class: 'days' }, days), warn ? el('span', { class: 'warning-mark' }, ` under ${warningDays} days`) : null));
  });
  into.replaceChildren(rows.length
    ? table(['credential', 'role', 'subject', 'fingerprint (SHA-256)', 'not after', 'days to expiry'], rows, { id: 'certificates' })
    : notice('info', `No certificate expires within ${answer.withinDays} days.`));
}

// ---- Start -------------------------------------------------------------------------------------------------

document.getElementById('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = document.getElementById('token-input');
  sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  input.value = '';
  void signIn();
});
document.getElementById('forget-token').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  askForToken(null);
});
window.addEventListener('hashchange', () => { void route(); });

if (sessionStorage.getItem(TOKEN_KEY)) void signIn();
else askForToken(null);
