#!/usr/bin/env node
'use strict';
/**
 * `npm run deps:check`: fails (exit 1) when
 *   - a package of package-lock.json is in a range of infra/deps/advisories.json (the advisories this
 *     project has had to act on; checked offline, production and development packages alike);
 *   - the registry's audit (`npm audit --omit=dev`) reports an advisory for a production dependency;
 *   - a production dependency is more than one major version behind the registry's latest
 *     (`npm outdated`; for a 0.x package each 0.minor line counts as a major, as semver's caret does).
 * Where the registry cannot be asked (its audit endpoint unreachable or refusing, no network), it says so
 * and passes with a warning: the offline table still applies.
 *
 * Run it on the Node the service runs on (24): npm picks a package's "latest" among the versions whose
 * `engines` accept the running Node, so on an older Node it compares with older lines.
 *
 *   node infra/deps/check.js            (npm run deps:check)
 *   node infra/deps/check.js --offline  (the advisory table only)
 */
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const ROOT = path.resolve(__dirname, '../..');
const MAX_MAJORS_BEHIND = 1;

/** A release version as numbers; null for anything else (prereleases are not compared). */
function parseVersion(text) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+.*)?$/.exec(String(text).trim());
  return m ? { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]), pre: m[4] ?? null } : null;
}

function compare(a, b) {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch || (a.pre === b.pre ? 0 : a.pre === null ? 1 : b.pre === null ? -1 : a.pre < b.pre ? -1 : 1);
}

/** Whether `version` satisfies every comparator of `range` ("<1.4.3", ">=5.0.0 <5.5.6"). */
function satisfies(version, range) {
  const v = parseVersion(version);
  if (!v) return false;
  return range.trim().split(/\s+/).every((comparator) => {
    const m = /^(>=|<=|>|<|=)?(.+)$/.exec(comparator);
    const bound = m && parseVersion(m[2]);
    if (!bound) throw new Error(`cannot read the comparator "${comparator}"`);
    const c = compare(v, bound);
    switch (m[1] ?? '=') {
      case '>=': return c >= 0;
      case '<=': return c <= 0;
      case '>': return c > 0;
      case '<': return c < 0;
      default: return c === 0;
    }
  });
}

/** Every package of a lockfile (v2/v3) as { name, version, dev, where }. */
function lockedPackages(lock) {
  const out = [];
  for (const [where, info] of Object.entries(lock.packages ?? {})) {
    if (!where || !info.version || info.link) continue;
    out.push({ name: info.name ?? where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length), version: info.version, dev: Boolean(info.dev), where });
  }
  return out;
}

/** The lockfile's packages that an advisory of the table names. */
function knownAdvisoryHits(lock, table) {
  const hits = [];
  for (const pkg of lockedPackages(lock)) {
    for (const advisory of table.advisories) {
      if (advisory.package === pkg.name && satisfies(pkg.version, advisory.vulnerable)) hits.push({ ...pkg, advisory });
    }
  }
  return hits;
}

/**
 * What `npm audit --omit=dev --json` said: { state: 'clean' }, { state: 'vulnerable', findings }, or
 * { state: 'unreachable', reason } when the registry could not be asked or refused. A missing lockfile
 * is not the registry's fault: { state: 'error', reason }.
 */
function classifyAudit(stdout, stderr) {
  let json;
  try {
    json = JSON.parse(stdout);
  } catch {
    return { state: 'unreachable', reason: firstLine(stderr) || 'npm audit printed no JSON' };
  }
  if (json && json.metadata && json.metadata.vulnerabilities) {
    const findings = Object.values(json.vulnerabilities ?? {}).map((v) => ({
      name: v.name,
      severity: v.severity,
      range: v.range,
      advisories: (v.via ?? []).filter((via) => typeof via === 'object').map((via) => `${via.title ?? via.source} (${via.url ?? 'no url'})`),
    }));
    return findings.length > 0 ? { state: 'vulnerable', findings } : { state: 'clean' };
  }
  const code = json?.error?.code ?? json?.code;
  if (code === 'ENOLOCK' || code === 'EAUDITNOLOCK') return { state: 'error', reason: 'npm audit needs package-lock.json' };
  const message = json?.message ?? json?.error?.summary ?? '';
  const reason = [String(message).startsWith(String(json?.statusCode)) ? '' : json?.statusCode, message, code].filter(Boolean).join(' ');
  return { state: 'unreachable', reason: reason || firstLine(stderr) || 'the audit endpoint returned an error' };
}

/** How many major lines `latest` is ahead of `current`; for 0.x, each 0.minor line counts (given the published versions). */
function majorsBehind(current, latest, published = []) {
  const c = parseVersion(current);
  const l = parseVersion(latest);
  if (!c || !l || compare(l, c) <= 0) return 0;
  if (c.major > 0) return l.major - c.major;
  if (l.major > 0) return l.major;
  const lines = new Set(published.map(parseVersion).filter((v) => v && v.pre === null && v.major === 0 && v.minor > c.minor && v.minor <= l.minor).map((v) => v.minor));
  return Math.max(lines.size, l.minor > c.minor ? 1 : 0);
}

function firstLine(text) {
  return String(text ?? '').split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('npm error A complete log')) ?? '';
}

function npm(args) {
  const cli = process.env.npm_execpath;
  const [command, argv] = cli && /\.(c?js)$/.test(cli) ? [process.execPath, [cli, ...args]] : ['npm', args];
  return spawnSync(command, argv, { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

function main(argv) {
  const offline = argv.includes('--offline');
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const table = JSON.parse(fs.readFileSync(path.join(__dirname, 'advisories.json'), 'utf8'));
  const production = Object.keys(pkg.dependencies ?? {});
  const failures = [];
  const warnings = [];
  const log = (line) => process.stdout.write(`${line}\n`);

  log(`deps:check on Node ${process.version}, npm ${firstLine(npm(['--version']).stdout) || '?'}`);
  const hits = knownAdvisoryHits(lock, table);
  for (const hit of hits) failures.push(`${hit.name}@${hit.version} (${hit.dev ? 'dev' : 'production'}, ${hit.where}): ${hit.advisory.ids.join(', ')}: ${hit.advisory.note}`);
  log(`advisory table (infra/deps/advisories.json, ${table.advisories.length} entries) over ${lockedPackages(lock).length} locked packages: ${hits.length === 0 ? 'none applies' : `${hits.length} hit(s)`}`);

  if (offline) {
    warnings.push('--offline: the registry was not asked (no audit, no outdated check)');
  } else {
    const audit = npm(['audit', '--omit=dev', '--json']);
    const verdict = classifyAudit(audit.stdout, audit.stderr);
    if (verdict.state === 'clean') log('npm audit --omit=dev: no advisories for production dependencies');
    else if (verdict.state === 'vulnerable') {
      for (const f of verdict.findings) failures.push(`npm audit: ${f.name} (${f.severity}, ${f.range}): ${f.advisories.join('; ') || 'see npm audit'}`);
    } else if (verdict.state === 'error') failures.push(`npm audit: ${verdict.reason}`);
    else warnings.push(`the registry's audit endpoint is unreachable (${verdict.reason}): production dependencies were NOT checked against the registry's advisories, only against the table`);

    const outdated = npm(['outdated', '--json']);
    let report = null;
    try { report = JSON.parse(outdated.stdout || '{}'); } catch { report = null; }
    if (!report || report.error) {
      warnings.push(`npm outdated could not ask the registry (${firstLine(report?.error?.summary) || firstLine(outdated.stderr) || 'no JSON'}): versions were not compared`);
    } else {
      const behind = [];
      for (const name of production) {
        const entry = report[name];
        if (!entry || !entry.current || !entry.latest) continue;
        let published = [];
        if (parseVersion(entry.current)?.major === 0) {
          const view = npm(['view', name, 'versions', '--json']);
          try { published = [].concat(JSON.parse(view.stdout)); } catch { published = []; }
        }
        const majors = majorsBehind(entry.current, entry.latest, published);
        behind.push(`${name} ${entry.current} → ${entry.latest}${majors > 0 ? ` (${majors} major${majors > 1 ? 's' : ''})` : ''}`);
        if (majors > MAX_MAJORS_BEHIND) failures.push(`${name} ${entry.current} is ${majors} majors behind ${entry.latest} (at most ${MAX_MAJORS_BEHIND} allowed)`);
      }
      log(`npm outdated, production dependencies: ${behind.length === 0 ? 'all at latest' : behind.join(', ')}`);
    }
  }

  for (const w of warnings) log(`WARNING: ${w}`);
  for (const f of failures) log(`FAIL: ${f}`);
  log(failures.length === 0 ? `deps:check passed${warnings.length ? ' with warnings' : ''}` : `deps:check failed (${failures.length})`);
  return failures.length === 0 ? 0 : 1;
}

module.exports = { parseVersion, satisfies, lockedPackages, knownAdvisoryHits, classifyAudit, majorsBehind };

if (require.main === module) process.exitCode = main(process.argv.slice(2));
