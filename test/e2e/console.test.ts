import { X509Certificate } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { CONSOLE_CSP } from '../../services/admin/console';
import { startTestApp, type TestApp } from '../support/app';
import { ADMIN_TOKENS, FULL_TOKEN, READ_TOKEN, startAdminApi, type AdminApiHandle } from '../support/admin-api';
import { datedCertificate, rsaKey } from '../support/dated-certificates';
import { collectUntilQuiet } from '../support/log-reads';

/**
 * The operator console (docs/management-api.md#console) in a real headless Chromium (Debian's, driven by
 * playwright-core), against the real service on the embedded backends and its admin port over loopback:
 * the token prompt, each view, a hostile payload shown as text with no script run, the CSP in force,
 * a dead letter replayed from the page and its journey in the request journal, a second letter of that request
 * refused (409) in the page, one refused while the replay ledger is full, and a read token that cannot. Screenshots of each view go to
 * test-artifacts/console/ (git-ignored).
 */
// The functions passed to page.evaluate run in the browser; the project compiles without the DOM library.
declare const window: any;
declare const document: any;
declare const sessionStorage: any;
declare const localStorage: any;

const CHROMIUM = '/usr/bin/chromium';
const ARTIFACTS = path.resolve(__dirname, '../../test-artifacts/console');
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACE_URL = 'https://traces.test/trace/{traceId}';

const HOSTILE = {
  note: '<img src=x onerror="window.__pwned=\'sample\'">',
  close: "</script><script>window.__pwned='script'</script>",
  link: "javascript:window.__pwned='link'",
  style: '<style>body{display:none}</style>',
};
const HOSTILE_NAME = '<img src=x onerror="window.__pwned=\'name\'">Orders';
const HOSTILE_CN = '<script>window.__pwned="cn"</script>partner';

let app: TestApp;
let api: AdminApiHandle;
let browser: Browser;
const codec = defaultAvroCodec();
let letter: { partition: number; offset: string; requestId: string; source: string };
/** Another letter of letter's request, written before letter is replayed: that of a copy of it that failed too. */
let failedCopy: { partition: number; offset: string; requestId: string; source: string; replayOf: string };
const problemsOf = new WeakMap<Page, string[]>();

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  // Fails the whole file, with the reason, when the browser cannot start: never a skip.
  browser = await chromium.launch({ executablePath: CHROMIUM }).catch((error: Error) => {
    throw new Error(`Chromium could not be started from ${CHROMIUM} (Debian's chromium package; .ci/run installs it): ${error.message}`);
  });
  // Certificates with known dates: one far off (not listed), one in 5 days (under the warning), one in 40 days.
  // Made before any connection is open. Key generation blocks this process for seconds on a loaded machine;
  // done between two API calls, the admin server (in this process) then closed its idle keep-alive socket
  // just as the next call reused it (ECONNRESET, seen with two CPU hogs running beside the test).
  const key = rsaKey();
  const day = 86_400_000;
  const ours = datedCertificate('console-receiver', new Date('2025-01-01T00:00:00Z'), new Date('2099-01-01T00:00:00Z'), key);
  const soon = datedCertificate(HOSTILE_CN, new Date('2025-01-01T00:00:00Z'), new Date(Date.now() + 5 * day + 3_600_000), key, '02');
  const later = datedCertificate('later-partner', new Date('2025-01-01T00:00:00Z'), new Date(Date.now() + 40 * day + 3_600_000), key, '03');
  // The replay ledger's smallest cap: the last dead-letter test fills it.
  app = await startTestApp('embedded', { ADMIN_TOKENS, WORKFLOW_CACHE_MS: '0', PUBLIC_BASE_URL: 'https://hooks.example.com', JOURNAL_TRACE_URL: TRACE_URL, REPLAY_LEDGER_MAX_ORIGINALS: '1000' });
  api = await startAdminApi(app);

  const put = async (route: string, body: unknown) => expect((await api.call('PUT', route, { body })).status).toBe(201);
  await put('/api/v1/workflows/wf-orders', { active: true, name: HOSTILE_NAME, nodes: [{ name: 'Orders hook', type: 'webhook', parameters: { authentication: 'none' } }, { name: 'Next', type: 'noop' }] });
  await put('/api/v1/workflows/wf-dl', { active: true, nodes: [{ name: 'Hook', type: 'webhook' }] });
  await put('/api/v1/credentials/cred-as2-soon', { type: 'as2ReceiverAuth', data: { certificate: ours.cert, privateKey: key, partnerCertificate: soon.cert } });
  await put('/api/v1/credentials/cred-as2-later', { type: 'as2ReceiverAuth', data: { certificate: ours.cert, privateKey: key, partnerCertificate: later.cert } });
  fingerprints = { soon: new X509Certificate(soon.cert).fingerprint256, later: new X509Certificate(later.cert).fingerprint256 };

  // The hostile payload, until the sampler has kept it.
  const posted = await fetch(`${app.baseUrl}/hook/wf-orders`, { method: 'POST', body: JSON.stringify(HOSTILE), headers: { 'content-type': 'application/json' } });
  expect(posted.status).toBe(200);
  while ((await api.call('GET', '/api/v1/workflows/wf-orders/nodes/Orders%20hook/samples')).body.samples.length === 0) await pause(100);

  // A dead letter, as the management API test makes one: a received record for a trigger node the workflow lacks.
  const ok = await fetch(`${app.baseUrl}/hook/wf-dl`, { method: 'POST', body: '{"x":1}', headers: { 'content-type': 'application/json' } });
  const requestId = ok.headers.get('x-request-id')!;
  const [original] = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).filter((r) => codec.decode('Received', r.value).requestId === requestId);
  const orphanId = `${requestId}-gone`;
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-dl', value: codec.encode('Received', { ...codec.decode('Received', original.value), requestId: orphanId, triggerNode: 'Gone' }), headers: { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` } }]);
  let letters: any[] = [];
  while (letters.length === 0) letters = (await api.call('GET', '/api/v1/dead-letters?workflow=wf-dl')).body.deadLetters;
  letter = letters[0];
  expect(letter).toMatchObject({ stage: 'decoder', code: 'trigger-missing', requestId: orphanId, replayOf: null });
  // A second letter of that request, before any fix: a replay of it (a range replay's copy) that failed again.
  const [orphan] = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).filter((r) => codec.decode('Received', r.value).requestId === orphanId);
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-dl', value: orphan.value, headers: { ...orphan.headers, 'ingress-replay-of': letter.source } }]);
  while (letters.length < 2) letters = (await api.call('GET', '/api/v1/dead-letters?workflow=wf-dl')).body.deadLetters;
  failedCopy = letters.find((l) => l.replayOf !== null);
  expect(failedCopy).toMatchObject({ stage: 'decoder', code: 'trigger-missing', requestId: orphanId, replayOf: letter.source });
  // The fix, so that a replay succeeds.
  expect((await api.call('PUT', '/api/v1/workflows/wf-dl', { body: { active: true, nodes: [{ name: 'Hook', type: 'webhook' }, { name: 'Gone', type: 'webhook' }] } })).status).toBe(200);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.stop();
  await app?.stop();
});

let fingerprints: { soon: string; later: string };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const shot = (page: Page, name: string) => page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });

/** A page of the console in its own context (its own sessionStorage), signed in with `token`. */
async function openConsole(token: string, view = ''): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  watch(page);
  await page.goto(`${api.url}/console${view ? `/#${view}` : ''}`);
  await page.fill('#token-input', token);
  await page.click('#token-form button[type=submit]');
  await page.locator('#caller').filter({ hasText: 'Token' }).waitFor();
  return { context, page };
}

/** Script errors, and the browser's reports of anything the CSP blocked. */
function watch(page: Page): void {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => { if (/Content.Security.Policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`); });
  problemsOf.set(page, problems);
}

/** Whatever a view showed, no payload ran and the page never needed what its CSP forbids. */
async function closeConsole(context: BrowserContext, page: Page): Promise<void> {
  expect(await page.evaluate(() => window.__pwned)).toBeUndefined();
  expect(problemsOf.get(page)).toEqual([]);
  await context.close();
}

/** A raw request (fetch would normalise `..` away), to see what the server itself does with a path. */
function raw(pathname: string, method = 'GET'): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(api.url);
    // `path` as given: a URL string would have its dot segments resolved before it is sent.
    const req = http.request({ host: hostname, port, path: pathname, method }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d) => { body += d; }).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject).end();
  });
}

test('the page is served without a token, with a strict CSP, nosniff and no referrer; only its own files, no listing, no way out of its folder', async () => {
  const redirect = await raw('/console');
  expect(redirect.status).toBe(301);
  expect(redirect.headers.location).toBe('/console/');
  const expected: [string, string][] = [['/console/', 'text/html; charset=utf-8'], ['/console/console.js', 'text/javascript; charset=utf-8'], ['/console/console.css', 'text/css; charset=utf-8'], ['/console/favicon.svg', 'image/svg+xml']];
  for (const [route, type] of expected) {
    const res = await raw(route);
    expect([route, res.status, res.headers['content-type']]).toEqual([route, 200, type]);
    expect(res.headers['content-security-policy']).toBe("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
  }
  expect(CONSOLE_CSP).toBe(redirect.headers['content-security-policy']);
  // The script never turns text into markup.
  expect((await raw('/console/console.js')).body).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
  const page = await raw('/console/');
  // No inline script or style in the page: both come from their own files.
  expect(page.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son\w+=/i);
  for (const route of ['/console/../package.json', '/console/%2e%2e/%2e%2e/package.json', '/console/..%2f..%2fpackage.json', '/console/console.ts', '/console/index.html/', '/console//etc/passwd', '/console/nothing.js', '/console/.']) {
    const res = await raw(route);
    expect([route, res.status]).toEqual([route, 404]);
    expect(res.body).not.toContain('"name": "inbound-event-ingress"');
  }
  expect((await raw('/console/', 'POST')).status).toBe(404);
});

test('the page asks for a token, keeps it in sessionStorage only, and says clearly when the API refuses it', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  watch(page);
  const response = await page.goto(`${api.url}/console`);
  expect(response!.headers()['content-security-policy']).toBe(CONSOLE_CSP);
  await page.locator('#token-form').waitFor();
  expect(await page.isHidden('#nav')).toBe(true);
  await page.fill('#token-input', `${FULL_TOKEN.slice(0, -1)}X`);
  await page.click('#token-form button[type=submit]');
  const refused = page.locator('#auth-error');
  await refused.filter({ hasText: '403' }).waitFor();
  expect(await refused.textContent()).toBe('The API refused the token: 403 authorization-wrong: Authorization data is wrong');
  await shot(page, '0-token-refused');

  await page.fill('#token-input', FULL_TOKEN);
  await page.click('#token-form button[type=submit]');
  await page.locator('#caller').filter({ hasText: 'ops' }).waitFor();
  expect(await page.textContent('#caller')).toBe('Token "ops", scope full');
  expect(await page.isHidden('#auth-error')).toBe(true);
  expect(page.url()).not.toContain(FULL_TOKEN);
  expect(await context.cookies()).toEqual([]);
  expect(await page.evaluate(() => ({ session: Object.values(sessionStorage), local: localStorage.length }))).toEqual({ session: [FULL_TOKEN], local: 0 });
  // The CSP is in force in the browser: an inline script added to the DOM does not run, and is reported blocked.
  const blocked = await page.evaluate(() => new Promise((resolve) => {
    document.addEventListener('securitypolicyviolation', (e: any) => resolve(e.effectiveDirective), { once: true });
    const s = document.createElement('script');
    s.textContent = 'window.__inline = 1';
    document.body.append(s);
  }));
  expect(blocked).toBe('script-src-elem');
  expect(await page.evaluate(() => window.__inline)).toBeUndefined();
  // That one was blocked on purpose: the page's own problems are checked by closeConsole.
  problemsOf.set(page, problemsOf.get(page)!.filter((p) => !p.startsWith('CSP:')));

  await page.click('#forget-token');
  expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  await closeConsole(context, page);
});

test('workflows: hook URLs, trigger nodes and the latest sample of each; a hostile payload is shown as text and runs nothing', async () => {
  const { context, page } = await openConsole(FULL_TOKEN);
  const row = page.locator('#workflows tr[data-workflow="wf-orders"]');
  await row.waitFor();
  expect(await page.locator('#workflows tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-workflow')))).toEqual(['wf-dl', 'wf-orders']);
  expect(await row.locator('.hook-url').textContent()).toBe('https://hooks.example.com/hook/wf-orders');
  expect(await row.locator('td').nth(1).textContent()).toBe(HOSTILE_NAME);
  expect(await row.locator('td').nth(4).textContent()).toBe('Orders hook (webhook)');
  await row.locator('button.show-samples').click();
  const sample = page.locator('#samples article[data-node="Orders hook"] pre');
  await sample.waitFor();
  expect(JSON.parse((await sample.textContent())!)).toEqual(HOSTILE);
  // Nothing of the payload became markup: the page has no image, no style and no script but its own.
  expect(await page.evaluate(() => ({
    images: document.images.length,
    styles: document.querySelectorAll('style').length,
    scripts: [...document.scripts].map((s) => s.getAttribute('src')),
    pwned: window.__pwned,
  }))).toEqual({ images: 0, styles: 0, scripts: ['console.js'], pwned: undefined });
  await shot(page, '1-workflows');
  await closeConsole(context, page);
});

test('dead letters: a full token replays one from the page, and the API shows the replay', async () => {
  const { context, page } = await openConsole(FULL_TOKEN, 'dead-letters');
  const position = `${letter.partition}/${letter.offset}`;
  const row = page.locator(`#dead-letters tr[data-letter="${position}"]`);
  await row.waitFor();
  expect(await row.textContent()).toContain('trigger-missing');
  expect(await page.locator('#replay-disabled-reason').count()).toBe(0);
  await shot(page, '2-dead-letters');
  await row.locator('button.replay').click();
  const status = row.locator('.replay-status[data-state]');
  await status.waitFor();
  expect(await status.getAttribute('data-state')).toBe('complete');
  const shown = (await status.textContent())!;
  // Only the letter named is read: not the failed copy's letter after it.
  expect(shown).toMatch(/^replay dl-\S+: complete, 1 replayed, 0 skipped$/);

  const jobs = (await api.call('GET', '/api/v1/replays', { token: READ_TOKEN })).body.replays;
  const job = jobs.find((j: any) => shown.startsWith(`replay ${j.id}:`));
  expect(job).toMatchObject({ kind: 'dead-letters', state: 'complete', replayed: 1, request: expect.objectContaining({ letters: [position] }) });
  let replayed: any[] = [];
  while (replayed.length === 0) {
    replayed = (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === letter.requestId);
  }
  expect(replayed).toEqual([expect.objectContaining({ workflowId: 'wf-dl', replayOf: letter.source })]);
  await shot(page, '3-dead-letter-replayed');
  await closeConsole(context, page);
});

test('dead letters: the "replay of" column names a failed copy\'s original; replaying a second letter of a request replayed already is refused in the page, naming the replay, and the request runs once', async () => {
  const { context, page } = await openConsole(FULL_TOKEN, 'dead-letters');
  const original = page.locator(`#dead-letters tr[data-letter="${letter.partition}/${letter.offset}"]`);
  const copy = page.locator(`#dead-letters tr[data-letter="${failedCopy.partition}/${failedCopy.offset}"]`);
  await copy.waitFor();
  expect(await page.locator('#dead-letters thead th').evaluateAll((ths) => ths.map((th) => th.textContent))).toContain('replay of');
  expect(await copy.locator('.replay-of').textContent()).toBe(letter.source);
  expect(await original.locator('.replay-of').textContent()).toBe('—');
  // The previous test replayed `letter`: this letter was there before that replay's copy, so it is a duplicate.
  const jobs = (await api.call('GET', '/api/v1/replays', { token: READ_TOKEN })).body.replays;
  const first = jobs.find((j: any) => j.request?.letters?.[0] === `${letter.partition}/${letter.offset}`);
  expect(first).toMatchObject({ state: 'complete', replayed: 1 });
  await copy.locator('button.replay').click();
  const status = copy.locator('.replay-status').filter({ hasText: 'refused' });
  await status.waitFor();
  const shown = (await status.textContent())!;
  expect(shown).toMatch(/^refused: 409 conflict: 1 of the dead letters asked for would replay a request another replay replays/);
  expect(shown).toContain(`dead letter ${failedCopy.partition}/${failedCopy.offset} (request ${letter.requestId}): its original, request ${letter.requestId}, is replayed by replay ${first.id} with dead letter ${letter.partition}/${letter.offset}`);
  expect(await copy.locator('button.replay').isDisabled()).toBe(false);
  await shot(page, '3b-dead-letter-replay-refused');
  // No job was started for it, and the request was asked to run once in all.
  expect((await api.call('GET', '/api/v1/replays', { token: READ_TOKEN })).body.replays).toHaveLength(jobs.length);
  const executions = (await collectUntilQuiet(app.backends.log, app.topics.executions, 500, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === letter.requestId);
  expect(executions).toEqual([expect.objectContaining({ workflowId: 'wf-dl', replayOf: letter.source })]);
  await closeConsole(context, page);
});

test('dead letters: with a read token the replay button is disabled and says why, and the API refuses the replay', async () => {
  const { context, page } = await openConsole(READ_TOKEN, 'dead-letters');
  const button = page.locator(`#dead-letters tr[data-letter="${letter.partition}/${letter.offset}"] button.replay`);
  await button.waitFor();
  expect(await button.isDisabled()).toBe(true);
  const reason = 'Replay needs a token with the full scope; token "viewer" has the read scope.';
  expect(await button.getAttribute('title')).toBe(reason);
  expect(await page.textContent('#replay-disabled-reason')).toBe(reason);
  const refused = await api.call('POST', '/api/v1/dead-letters/replay', { token: READ_TOKEN, body: { letters: [`${letter.partition}/${letter.offset}`] } });
  expect(refused.status).toBe(403);
  expect(refused.body.error).toBe('scope-insufficient');
  await shot(page, '4-dead-letters-read-token');
  await closeConsole(context, page);
});

test('dead letters: with the replay ledger full, a letter is refused in the page naming REPLAY_LEDGER_MAX_ORIGINALS; a job that counted letters unrecorded says so in its status line', async () => {
  // A new request dead-lettered: for a trigger node wf-dl does not have.
  const [received] = (await collectUntilQuiet(app.backends.log, app.topics.received, 300, 500)).filter((r) => codec.decode('Received', r.value).requestId === letter.requestId);
  const requestId = `${letter.requestId}-full`;
  await app.backends.log.append([{ topic: app.topics.received, key: 'wf-dl', value: codec.encode('Received', { ...codec.decode('Received', received.value), requestId, triggerNode: 'Missing' }) }]);
  let fresh: any;
  while (!fresh) { fresh = (await api.call('GET', '/api/v1/dead-letters?workflow=wf-dl')).body.deadLetters.find((d: any) => d.requestId === requestId); if (!fresh) await pause(100); }
  // Another process (the direct command) claimed 1000 originals: the ledger is at its cap. Its batch is the next
  // object of the ledger in the object store, as that process's commit would create it.
  const claims = Array.from({ length: 1000 }, (_, i) => [`filler ${i}`, `0/${i}`]);
  const prefix = `replay/ledger/${app.topics.deadLetter}/`;
  let batches = 0;
  for await (const _ of app.backends.store.list(prefix)) batches++;
  await app.backends.store.put(`${prefix}${String(batches + 1).padStart(12, '0')}.json`, Buffer.from(JSON.stringify({ replay: 'cli-0000000000000000', ends: { 0: '1000000' }, claims })), { ifAbsent: true });

  const { context, page } = await openConsole(FULL_TOKEN, 'dead-letters');
  const row = page.locator(`#dead-letters tr[data-letter="${fresh.partition}/${fresh.offset}"]`);
  await row.locator('button.replay').click();
  const refused = row.locator('.replay-status').filter({ hasText: 'refused' });
  await refused.waitFor();
  expect(await refused.textContent()).toMatch(/^refused: 409 conflict: the replay ledger is full \(1000 originals, REPLAY_LEDGER_MAX_ORIGINALS\): 1 of the dead letters asked for cannot be recorded as replayed.* dead letter \d+\/\d+: its original, request .*-full, cannot be recorded/);
  expect(await row.locator('button.replay').isDisabled()).toBe(false);

  // A job of named letters is refused rather than started while the ledger is full, so none counts letters
  // unrecorded: the status line is checked with the job as the API would give one that did (the answer stubbed).
  const job = {
    id: 'dl-00000000000000ff', kind: 'dead-letters', request: { stage: null, workflow: null, since: null, letters: [`${fresh.partition}/${fresh.offset}`] }, state: 'complete',
    replayed: 0, skipped: 1, duplicates: 0, unrecorded: 1, skippedLetters: [], read: 1, remaining: null, startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), error: null, runningIn: null,
  };
  await page.route('**/api/v1/dead-letters/replay', (route) => route.fulfill({ status: 202, contentType: 'application/json', body: JSON.stringify(job) }));
  await row.locator('button.replay').click();
  const status = row.locator('.replay-status[data-state="complete"]');
  await status.waitFor();
  expect(await status.textContent()).toBe(`replay ${job.id}: complete, 0 replayed, 1 skipped (1 not replayed: the replay ledger is full, REPLAY_LEDGER_MAX_ORIGINALS)`);
  await shot(page, '4b-dead-letter-ledger-full');
  await closeConsole(context, page);
});

test('certificates: within the chosen days, soonest first, fingerprints, and those under the warning threshold highlighted', async () => {
  const { context, page } = await openConsole(READ_TOKEN, 'certificates');
  await page.locator('#certificates').waitFor();
  // Within 30 days (the default): only the one expiring in 5.
  expect(await page.locator('#certificates tbody tr').count()).toBe(1);
  await page.fill('#within-days', '60');
  await page.click('#load-certificates');
  await page.locator('#certificates tbody tr').nth(1).waitFor();
  const rows = await page.locator('#certificates tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    warn: tr.classList.contains('warn'),
    cells: [...tr.querySelectorAll('td')].map((td) => td.textContent),
  })));
  // The subject as the API gives it (RFC 4514 escapes), shown as text.
  const [soonSubject] = (await api.call('GET', '/api/v1/certificates?withinDays=60')).body.certificates.map((c: any) => c.subject);
  expect(soonSubject).toMatch(/<script.*<\/script/);
  expect(rows).toEqual([
    { warn: true, cells: ['cred-as2-soon', 'partner', soonSubject, fingerprints.soon, expect.any(String), '5 under 14 days'] },
    { warn: false, cells: ['cred-as2-later', 'partner', 'CN=later-partner, O=AS2 test', fingerprints.later, expect.any(String), '40'] },
  ]);
  await shot(page, '5-certificates');
  await closeConsole(context, page);
});

test('events: the recent requests of a workflow with their state, and the journey of one with its trace', async () => {
  // The dead-lettered request, after the replay test: received, dead-lettered, replayed, then decoded and requested.
  const journeyOf = async () => ((await api.call('GET', `/api/v1/events/${encodeURIComponent(letter.requestId)}`)).body?.entries ?? []) as any[];
  let entries = await journeyOf();
  while (!entries.some((e) => e.kind === 'execution-requested')) { await pause(100); entries = await journeyOf(); }
  const { context, page } = await openConsole(READ_TOKEN, 'events');
  await page.selectOption('#events-workflow', 'wf-dl');
  await page.click('#load-events');
  const request = page.locator(`#requests tr[data-request="${letter.requestId}"]`);
  await request.waitFor();
  expect(await request.locator('.state').textContent()).toBe('execution-requested');
  await request.locator('button.request-link').click();
  await page.locator('#journey-entries').waitFor();
  const shown = await page.locator('#journey-entries tbody tr').evaluateAll((trs) => trs.map((tr) => ({
    kind: tr.getAttribute('data-kind'),
    traceId: tr.querySelector('.trace-id')?.textContent,
    link: tr.querySelector('a')?.getAttribute('href') ?? null,
  })));
  expect(shown).toEqual(entries.map((e) => ({ kind: e.kind, traceId: e.traceId ?? '—', link: e.traceUrl ?? null })));
  expect(shown.map((s) => s.kind)).toEqual(expect.arrayContaining(['received', 'dead-lettered', 'replayed', 'decoded', 'execution-requested']));
  expect(shown[0]).toEqual({ kind: 'received', traceId: TRACE_ID, link: TRACE_URL.replace('{traceId}', TRACE_ID) });
  await shot(page, '6-events-journey');
  // A request id the journal does not know: said as such, not as a failure of the page.
  await page.fill('#request-id', 'no-such-request');
  await page.click('#show-journey');
  await page.locator('#journey #journal-none').waitFor();
  expect(await page.textContent('#journey #journal-none')).toBe('No journal entry for request no-such-request (unknown, older than JOURNAL_RETENTION_DAYS, or not journaled yet)');
  await closeConsole(context, page);
});
