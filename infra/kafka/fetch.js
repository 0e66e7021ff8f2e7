#!/usr/bin/env node
'use strict';
/**
 * Makes sure infra/kafka/lib/<version>/ holds the Kafka broker jars described by infra/kafka/pom.xml.
 *
 *   node infra/kafka/fetch.js                       (run by `npm test` through the pretest script)
 *   KAFKA_VERSION=3.9.2 node infra/kafka/fetch.js   (another supported version: 3.9.x or 4.x)
 *
 * - The version is KAFKA_VERSION, else the pom's default <kafka.version> (4.4.0). Each version has
 *   its own lib/<version>/ (git-ignored), so switching versions never re-downloads or mixes jars.
 * - Fast no-op when lib/<version>/ is already complete.
 * - Otherwise needs Java 17+ and Maven; prints one exact install hint and exits 1 if missing.
 *   Maven runs with the pom's profile for the version's line (kafka-4 or kafka-3.9).
 * - Maven writes into a private temp dir inside lib/, a marker file is written last, and the
 *   directory is renamed into place, so an interrupted fetch never leaves a half-filled lib/<version>/.
 * - Concurrent runs (any versions) serialise on one lock file; a waiter re-checks its directory when
 *   the lock is released.
 *
 * Also usable as a module: require('./fetch').ensureKafkaJars() -> absolute path of lib/<version>/.
 */
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const KAFKA_DIR = __dirname;
/** Parent of the per-version directories lib/<version>/ (and of the lock and temp dirs). */
const LIB_ROOT = path.join(KAFKA_DIR, 'lib');
const POM = path.join(KAFKA_DIR, 'pom.xml');
const MARKER = '.fetch-complete';
const LOCK = path.join(LIB_ROOT, '.fetch.lock');
const INSTALL_HINT = 'Kafka tests need Java 17+ and Maven: apt-get install -y openjdk-17-jre-headless maven';
const LOCK_WAIT_MS = 10 * 60 * 1000;
/** The versions start-kafka.js knows how to configure, and the pom profile of each line. */
const SUPPORTED = /^(?:3\.9|4\.\d+)\.\d+$/;

class FetchError extends Error {}

/** The pom's default Kafka version (the first <kafka.version>, in the top-level properties). */
function defaultKafkaVersion() {
  const m = /<kafka\.version>\s*([^<\s]+)\s*<\/kafka\.version>/.exec(fs.readFileSync(POM, 'utf8'));
  if (!m) throw new FetchError(`cannot find <kafka.version> in ${POM}`);
  return m[1];
}

/** The Kafka version to use: KAFKA_VERSION (3.9.x or 4.x), else the pom's default. */
function kafkaVersion(env = process.env) {
  const wanted = (env.KAFKA_VERSION || '').trim();
  if (!wanted) return defaultKafkaVersion();
  if (!SUPPORTED.test(wanted)) {
    throw new FetchError(`KAFKA_VERSION=${wanted} is not supported: the test broker runs Kafka 3.9.x or 4.x (e.g. 3.9.2; unset for ${defaultKafkaVersion()})`);
  }
  return wanted;
}

/** The pom profile with the dependency set of `version`'s line. */
function mavenProfile(version) {
  return version.startsWith('3.') ? 'kafka-3.9' : 'kafka-4';
}

/** Where the jars of `version` live. */
function libDir(version = kafkaVersion()) {
  return path.join(LIB_ROOT, version);
}

/** True when `dir` holds a usable set of jars for the given Kafka version. */
function isComplete(dir, version) {
  let names;
  try {
    names = fs.readdirSync(dir);
  } catch {
    return false;
  }
  if (!names.includes(`kafka_2.13-${version}.jar`)) return false;
  if (names.includes(MARKER)) return true;
  // lib/<version>/ filled by hand with `mvn dependency:copy-dependencies` (see pom.xml): accept it
  // when the jars that are always needed are there, the logging binding of the version's line included.
  const has = (prefix) => names.some((n) => n.startsWith(prefix) && n.endsWith('.jar'));
  const binding = mavenProfile(version) === 'kafka-3.9' ? 'slf4j-reload4j-' : 'log4j-slf4j-impl-';
  return has(`kafka-clients-${version}`) && has('kafka-server-common-') && has('scala-library-') && has('slf4j-api-') && has(binding);
}

function hasKafkaJars(version = kafkaVersion()) {
  return isComplete(libDir(version), version);
}

function sleepSync(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function checkTools() {
  const problems = [];
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  if (java.error || java.status !== 0) {
    problems.push(`java not found (${java.error ? java.error.code : `exit ${java.status}`})`);
  } else {
    const out = `${java.stderr}${java.stdout}`;
    const m = /version "(\d+)(?:\.(\d+))?/.exec(out);
    let major = m ? Number(m[1]) : NaN;
    if (major === 1 && m[2]) major = Number(m[2]); // "1.8.0_x"
    if (!(major >= 17)) problems.push(`java is too old or unrecognised: ${out.split('\n')[0].trim()}`);
  }
  const mvn = spawnSync('mvn', ['-v'], { encoding: 'utf8' });
  if (mvn.error || mvn.status !== 0) {
    problems.push(`mvn not found (${mvn.error ? mvn.error.code : `exit ${mvn.status}`})`);
  }
  return problems;
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

/** Take the lock file, or wait for whoever holds it. Returns false if lib/<version>/ became ready meanwhile. */
function acquireLock(version) {
  fs.mkdirSync(LIB_ROOT, { recursive: true });
  const deadline = Date.now() + LOCK_WAIT_MS;
  let announced = false;
  for (;;) {
    try {
      fs.writeFileSync(LOCK, String(process.pid), { flag: 'wx' });
      return true;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
    if (isComplete(libDir(version), version)) return false;
    let holder = NaN;
    try {
      holder = Number(fs.readFileSync(LOCK, 'utf8'));
    } catch {
      continue; // released between our two calls
    }
    if (!holder || !pidAlive(holder)) {
      // Stale lock from a killed fetch: take it over.
      try {
        fs.unlinkSync(LOCK);
      } catch {}
      continue;
    }
    if (Date.now() > deadline) throw new FetchError(`timed out waiting for another Kafka jar fetch (pid ${holder}, lock ${LOCK})`);
    if (!announced) {
      process.stderr.write(`[kafka-fetch] waiting for another fetch (pid ${holder}) to finish...\n`);
      announced = true;
    }
    sleepSync(500);
  }
}

function releaseLock() {
  try {
    if (Number(fs.readFileSync(LOCK, 'utf8')) === process.pid) fs.unlinkSync(LOCK);
  } catch {}
}

function runMaven(version, tmpDir) {
  const args = [
    '-B', '-q', '-Dstyle.color=never',
    `-P${mavenProfile(version)}`, `-Dkafka.version=${version}`,
    'dependency:copy-dependencies', `-DoutputDirectory=${tmpDir}`,
  ];
  const started = Date.now();
  process.stderr.write(`[kafka-fetch] downloading Kafka ${version} jars with Maven (mvn ${args.join(' ')})...\n`);
  const res = spawnSync('mvn', args, { cwd: KAFKA_DIR, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  // -q keeps Maven quiet on success; show whatever it did print (errors), minus bare colour resets.
  const clean = (s) => (s || '').replace(/\x1b\[[0-9;]*m/g, '').replace(/^\s*\n/gm, '');
  const out = clean(res.stdout) + clean(res.stderr);
  if (out.trim()) process.stderr.write(out.endsWith('\n') ? out : `${out}\n`);
  if (res.error) throw new FetchError(`could not run mvn: ${res.error.message}`);
  if (res.status !== 0) throw new FetchError(`mvn exited with ${res.status === null ? `signal ${res.signal}` : `code ${res.status}`}`);
  process.stderr.write(`[kafka-fetch] done in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
}

/**
 * The flat layout of earlier versions of this script (jars directly in lib/) would sit beside the
 * per-version directories unused: remove it. Runs under the lock.
 */
function removeFlatLayout() {
  let names;
  try {
    names = fs.readdirSync(LIB_ROOT);
  } catch {
    return;
  }
  for (const n of names) {
    if (n.endsWith('.jar') || n === MARKER) fs.rmSync(path.join(LIB_ROOT, n), { force: true });
  }
}

/**
 * Synchronously ensures lib/<version>/ is populated (KAFKA_VERSION, else the pom's default).
 * Returns its absolute path. Throws FetchError with a readable message.
 */
function ensureKafkaJars(version = kafkaVersion()) {
  const dir = libDir(version);
  if (isComplete(dir, version)) return dir;

  const problems = checkTools();
  if (problems.length) {
    const err = new FetchError(`${INSTALL_HINT}\n  (${problems.join('; ')})`);
    err.installHint = INSTALL_HINT;
    throw err;
  }

  if (!acquireLock(version)) return dir;
  const tmpDir = path.join(LIB_ROOT, `.tmp-${version}-${process.pid}-${Date.now()}`);
  try {
    if (isComplete(dir, version)) return dir;
    removeFlatLayout();
    fs.mkdirSync(tmpDir, { recursive: true });
    runMaven(version, tmpDir);
    if (!isComplete(tmpDir, version)) {
      throw new FetchError(`Maven finished but ${tmpDir} has no kafka_2.13-${version}.jar`);
    }
    fs.writeFileSync(path.join(tmpDir, MARKER), `kafka ${version}\nfetched ${new Date().toISOString()}\n`);
    if (fs.existsSync(dir)) {
      // Partial lib/<version>/ (e.g. an interrupted manual mvn run): move it aside first.
      const old = path.join(LIB_ROOT, `.old-${version}-${process.pid}-${Date.now()}`);
      fs.renameSync(dir, old);
      fs.rmSync(old, { recursive: true, force: true });
    }
    try {
      fs.renameSync(tmpDir, dir);
    } catch (e) {
      // Someone else won the race (e.g. a manual mvn run); fine if their result is complete.
      if (!isComplete(dir, version)) throw e;
    }
    return dir;
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
    releaseLock();
  }
}

module.exports = {
  ensureKafkaJars,
  hasKafkaJars,
  kafkaVersion,
  defaultKafkaVersion,
  mavenProfile,
  libDir,
  LIB_ROOT,
  INSTALL_HINT,
  FetchError,
};

if (require.main === module) {
  try {
    ensureKafkaJars();
  } catch (e) {
    process.stderr.write(`${e instanceof FetchError ? e.message : e.stack || e}\n`);
    process.exit(1);
  }
}
