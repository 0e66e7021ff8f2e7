#!/usr/bin/env node
'use strict';
/**
 * Makes sure infra/bouncycastle/lib/<version>/ holds the BouncyCastle jars of pom.xml and GcmMessage
 * compiled against them: the BouncyCastle sender the AES-GCM interoperability tests use.
 *
 *   node infra/bouncycastle/fetch.js   (run by `npm test` through the pretest script)
 *
 * - Fast no-op when lib/<version>/ is complete (a marker written last) and GcmMessage.class is newer
 *   than GcmMessage.java.
 * - Otherwise needs a JDK 17+ (javac) and Maven; prints one line saying what is missing and exits 1:
 *   the suite must not run without its peer (the tests would fail anyway, with the same reason).
 * - Everything is built in a private temp dir and renamed into place, so an interrupted or concurrent
 *   fetch never leaves a half-filled lib/<version>/ (the loser of a race drops its copy).
 *
 * Also usable as a module: require('./fetch').ensureBouncyCastle() -> { classpath, version }.
 */
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const DIR = __dirname;
const LIB_ROOT = path.join(DIR, 'lib');
const POM = path.join(DIR, 'pom.xml');
const SOURCE = path.join(DIR, 'GcmMessage.java');
const MARKER = '.fetch-complete';
const INSTALL_HINT = 'the BouncyCastle AS2 tests need a JDK 17+ and Maven: apt-get install -y openjdk-17-jdk-headless maven';
const JARS = ['bcprov-jdk18on-', 'bcpkix-jdk18on-', 'bcutil-jdk18on-'];

class FetchError extends Error {}

function bcVersion() {
  const m = /<bc\.version>\s*([^<\s]+)\s*<\/bc\.version>/.exec(fs.readFileSync(POM, 'utf8'));
  if (!m) throw new FetchError(`cannot find <bc.version> in ${POM}`);
  return m[1];
}

const libDir = (version = bcVersion()) => path.join(LIB_ROOT, version);
const classpath = (dir) => [path.join(dir, '*'), path.join(dir, 'classes')].join(path.delimiter);

function isComplete(dir, version) {
  let names;
  try {
    names = fs.readdirSync(dir);
  } catch {
    return false;
  }
  if (!names.includes(MARKER) || !JARS.every((p) => names.includes(`${p}${version}.jar`))) return false;
  // GcmMessage.java changed since it was compiled: build again.
  try {
    return fs.statSync(path.join(dir, 'classes', 'GcmMessage.class')).mtimeMs >= fs.statSync(SOURCE).mtimeMs;
  } catch {
    return false;
  }
}

function run(cmd, args, what, cwd = DIR) {
  const res = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (res.error) throw new FetchError(`${what}: could not run ${cmd} (${res.error.code || res.error.message}); ${INSTALL_HINT}`);
  if (res.status !== 0) {
    const detail = `${res.stderr || ''}${res.stdout || ''}`.replace(/\x1b\[[0-9;]*m/g, '').trim().split('\n').slice(-5).join(' | ');
    throw new FetchError(`${what} failed (${res.status === null ? `signal ${res.signal}` : `exit ${res.status}`}): ${detail}`);
  }
  return `${res.stderr || ''}${res.stdout || ''}`;
}

function checkTools() {
  const out = run('javac', ['-version'], 'checking javac');
  const m = /javac (\d+)/.exec(out);
  if (!m || Number(m[1]) < 17) throw new FetchError(`javac is too old or unrecognised (${out.trim()}); ${INSTALL_HINT}`);
  run('mvn', ['-v'], 'checking mvn');
}

/** Synchronously ensures lib/<version>/ is complete; returns the class path for `java -cp`. Throws FetchError. */
function ensureBouncyCastle() {
  const version = bcVersion();
  const dir = libDir(version);
  if (isComplete(dir, version)) return { version, classpath: classpath(dir) };
  checkTools();
  fs.mkdirSync(LIB_ROOT, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(LIB_ROOT, `.tmp-${version}-`));
  try {
    const started = Date.now();
    process.stderr.write(`[bouncycastle-fetch] downloading BouncyCastle ${version} jars with Maven...\n`);
    run('mvn', ['-B', '-q', '-Dstyle.color=never', 'dependency:copy-dependencies', `-DoutputDirectory=${tmp}`], 'mvn dependency:copy-dependencies');
    const missing = JARS.filter((p) => !fs.existsSync(path.join(tmp, `${p}${version}.jar`)));
    if (missing.length) throw new FetchError(`Maven did not bring ${missing.map((p) => `${p}${version}.jar`).join(', ')}`);
    run('javac', ['-cp', path.join(tmp, '*'), '-d', path.join(tmp, 'classes'), SOURCE], 'compiling GcmMessage.java');
    fs.writeFileSync(path.join(tmp, MARKER), `${new Date().toISOString()}\n`);
    fs.rmSync(dir, { recursive: true, force: true });
    try {
      fs.renameSync(tmp, dir);
    } catch (e) {
      if (!isComplete(dir, version)) throw e; // another fetch won the race: use its copy
    }
    process.stderr.write(`[bouncycastle-fetch] done in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return { version, classpath: classpath(dir) };
}

module.exports = { ensureBouncyCastle, FetchError, libDir, bcVersion };

if (require.main === module) {
  try {
    ensureBouncyCastle();
  } catch (e) {
    process.stderr.write(`[bouncycastle-fetch] ${e instanceof FetchError ? e.message : e.stack || e}\n`);
    process.exit(1);
  }
}
