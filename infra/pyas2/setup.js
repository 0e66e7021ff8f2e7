#!/usr/bin/env node
'use strict';
/**
 * Makes sure infra/pyas2/.venv holds pyas2lib (the independent AS2 partner the interoperability tests use) and
 * requests (a partner's Python HTTP client, for the Basic Auth test).
 *
 *   node infra/pyas2/setup.js        (run by `npm test` through the pretest script)
 *
 * - Fast no-op when .venv exists, was built from the current requirements.txt (a hash in
 *   .venv/.requirements.sha256) and `import pyas2lib, requests` works.
 * - Otherwise: `python3 -m venv`, `pip install -r requirements.txt`, the oscrypto fix below, then
 *   the import; the hash is written last, so an interrupted setup is redone next time.
 * - On failure prints one line saying what is missing and exits 1: the suite must not run without it.
 *
 * The oscrypto fix: oscrypto 1.3.0 (the latest on PyPI) finds the OpenSSL version with the regex
 * `\d\.\d\.\d[a-z]*\b`, which does not match a two-digit patch ("OpenSSL 3.0.19"), so importing it
 * raises "Error detecting the version of libcrypto". Upstream fixed it with `\d+` (wbond/oscrypto PR #76,
 * commit d5f3437ed24257895ae1edd9e503cfb352e635a8, issues #75/#78) but has not released it. We make the
 * same one-character edit in the two installed files of the venv only; it is idempotent (the new
 * pattern no longer contains the old one).
 */
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { spawnSync } = require('child_process');

const DIR = __dirname;
const VENV = path.join(DIR, '.venv');
const REQUIREMENTS = path.join(DIR, 'requirements.txt');
const STAMP = path.join(VENV, '.requirements.sha256');
const PYTHON = path.join(VENV, 'bin', 'python');
const OSCRYPTO_FILES = ['_libcrypto_cffi.py', '_libcrypto_ctypes.py'];
const OLD_PATTERN = "'\\\\b(\\\\d\\\\.\\\\d\\\\.\\\\d[a-z]*)\\\\b'";
const NEW_PATTERN = "'\\\\b(\\\\d\\\\.\\\\d\\\\.\\\\d+[a-z]*)\\\\b'";

class SetupError extends Error {}

function run(cmd, args, what) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.error || r.status !== 0) {
    const detail = (r.error ? r.error.message : `${r.stderr}${r.stdout}`).trim().split('\n').slice(-3).join(' | ');
    throw new SetupError(`${what} failed: ${detail}`);
  }
  return r.stdout;
}

function requirementsHash() {
  return crypto.createHash('sha256').update(fs.readFileSync(REQUIREMENTS)).digest('hex');
}

/** Apply the upstream oscrypto version-regex fix inside the venv; returns how many files changed. */
function patchOscrypto() {
  const sitePackages = run(PYTHON, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'], 'locating site-packages').trim();
  let changed = 0;
  for (const name of OSCRYPTO_FILES) {
    const file = path.join(sitePackages, 'oscrypto', '_openssl', name);
    if (!fs.existsSync(file)) throw new SetupError(`oscrypto file ${file} not found (requirements changed?)`);
    const text = fs.readFileSync(file, 'utf8');
    if (text.includes(NEW_PATTERN)) continue;
    if (!text.includes(OLD_PATTERN)) throw new SetupError(`oscrypto ${name}: the version regex to fix was not found (oscrypto changed?)`);
    fs.writeFileSync(file, text.replace(OLD_PATTERN, NEW_PATTERN));
    changed++;
  }
  return changed;
}

function works() {
  return spawnSync(PYTHON, ['-c', 'import pyas2lib.as2, requests'], { stdio: 'ignore' }).status === 0;
}

function ensureVenv() {
  const want = requirementsHash();
  if (fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8').trim() === want && works()) return PYTHON;
  const venvProbe = spawnSync('python3', ['-c', 'import venv, ensurepip'], { stdio: 'ignore' });
  if (venvProbe.error) throw new SetupError('python3 not found: apt-get install -y python3 python3-venv');
  if (venvProbe.status !== 0) throw new SetupError('python3 has no venv/ensurepip: apt-get install -y python3-venv');
  fs.rmSync(VENV, { recursive: true, force: true });
  run('python3', ['-m', 'venv', VENV], 'python3 -m venv');
  run(PYTHON, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', REQUIREMENTS], 'pip install -r infra/pyas2/requirements.txt');
  patchOscrypto();
  if (!works()) {
    const r = spawnSync(PYTHON, ['-c', 'import pyas2lib.as2, requests'], { encoding: 'utf8' });
    throw new SetupError(`import pyas2lib, requests failed after install: ${(r.stderr || '').trim().split('\n').pop()}`);
  }
  fs.writeFileSync(STAMP, `${want}\n`);
  return PYTHON;
}

module.exports = { ensureVenv, PYTHON };

if (require.main === module) {
  try {
    ensureVenv();
  } catch (e) {
    console.error(`infra/pyas2/setup.js: pyas2lib test partner unavailable: ${e instanceof SetupError ? e.message : e.stack || e}`);
    process.exit(1);
  }
}
