#!/usr/bin/env node
'use strict';
/**
 * Makes sure infra/kafka/lib holds the Kafka broker jars described by infra/kafka/pom.xml.
 *
 *   node infra/kafka/fetch.js        (run by `npm test` through the pretest script)
 *
 * - Fast no-op when lib/ already holds the kafka_2.13 jar of the pom's Kafka version.
 * - Otherwise needs Java 17+ and Maven; prints one exact install hint and exits 1 if missing.
 * - Maven writes into a private temp dir next to lib/, a marker file is written last, and the
 *   directory is renamed into place, so an interrupted fetch never leaves a half-filled lib/.
 * - Concurrent runs serialise on a lock file; a waiter re-checks lib/ when the lock is released.
 *
 * Also usable as a module: require('./fetch').ensureKafkaJars() -> absolute path of lib/.
 */
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const KAFKA_DIR = __dirname;
const LIB_DIR = path.join(KAFKA_DIR, 'lib');
const POM = path.join(KAFKA_DIR, 'pom.xml');
const MARKER = '.fetch-complete';
const LOCK = path.join(KAFKA_DIR, '.fetch.lock');
const INSTALL_HINT = 'Kafka tests need Java 17+ and Maven: apt-get install -y openjdk-17-jre-headless maven';
const LOCK_WAIT_MS = 10 * 60 * 1000;

class FetchError extends Error {}

function kafkaVersion() {
  const m = /<kafka\.version>\s*([^<\s]+)\s*<\/kafka\.version>/.exec(fs.readFileSync(POM, 'utf8'));
  if (!m) throw new FetchError(`cannot find <kafka.version> in ${POM}`);
  return m[1];
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
  // lib/ filled by hand with `mvn dependency:copy-dependencies -DoutputDirectory=lib`: accept it
  // when the jars that are always needed are there.
  const has = (prefix) => names.some((n) => n.startsWith(prefix) && n.endsWith('.jar'));
  return has(`kafka-clients-${version}`) && has('kafka-server-common-') && has('scala-library-') && has('slf4j-api-');
}

function hasKafkaJars() {
  return isComplete(LIB_DIR, kafkaVersion());
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

/** Take the lock file, or wait for whoever holds it. Returns false if lib/ became ready meanwhile. */
function acquireLock(version) {
  const deadline = Date.now() + LOCK_WAIT_MS;
  let announced = false;
  for (;;) {
    try {
      fs.writeFileSync(LOCK, String(process.pid), { flag: 'wx' });
      return true;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
    if (isComplete(LIB_DIR, version)) return false;
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

function runMaven(tmpDir) {
  const args = ['-B', '-q', '-Dstyle.color=never', 'dependency:copy-dependencies', `-DoutputDirectory=${tmpDir}`];
  const started = Date.now();
  process.stderr.write(`[kafka-fetch] downloading Kafka ${kafkaVersion()} jars with Maven (mvn ${args.join(' ')})...\n`);
  const res = spawnSync('mvn', args, { cwd: KAFKA_DIR, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  // -q keeps Maven quiet on success; show whatever it did print (errors), minus bare colour resets.
  const clean = (s) => (s || '').replace(/\x1b\[[0-9;]*m/g, '').replace(/^\s*\n/gm, '');
  const out = clean(res.stdout) + clean(res.stderr);
  if (out.trim()) process.stderr.write(out.endsWith('\n') ? out : `${out}\n`);
  if (res.error) throw new FetchError(`could not run mvn: ${res.error.message}`);
  if (res.status !== 0) throw new FetchError(`mvn exited with ${res.status === null ? `signal ${res.signal}` : `code ${res.status}`}`);
  process.stderr.write(`[kafka-fetch] done in ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
}

/** Synchronously ensures lib/ is populated. Returns LIB_DIR. Throws FetchError with a readable message. */
function ensureKafkaJars() {
  const version = kafkaVersion();
  if (isComplete(LIB_DIR, version)) return LIB_DIR;

  const problems = checkTools();
  if (problems.length) {
    const err = new FetchError(`${INSTALL_HINT}\n  (${problems.join('; ')})`);
    err.installHint = INSTALL_HINT;
    throw err;
  }

  if (!acquireLock(version)) return LIB_DIR;
  const tmpDir = path.join(KAFKA_DIR, `.lib-tmp-${process.pid}-${Date.now()}`);
  try {
    if (isComplete(LIB_DIR, version)) return LIB_DIR;
    fs.mkdirSync(tmpDir, { recursive: true });
    runMaven(tmpDir);
    if (!isComplete(tmpDir, version)) {
      throw new FetchError(`Maven finished but ${tmpDir} has no kafka_2.13-${version}.jar`);
    }
    fs.writeFileSync(path.join(tmpDir, MARKER), `kafka ${version}\nfetched ${new Date().toISOString()}\n`);
    if (fs.existsSync(LIB_DIR)) {
      // Stale or partial lib/ (older version, interrupted manual fetch): move it aside first.
      const old = path.join(KAFKA_DIR, `.lib-old-${process.pid}-${Date.now()}`);
      fs.renameSync(LIB_DIR, old);
      fs.rmSync(old, { recursive: true, force: true });
    }
    try {
      fs.renameSync(tmpDir, LIB_DIR);
    } catch (e) {
      // Someone else won the race (e.g. a manual mvn run); fine if their result is complete.
      if (!isComplete(LIB_DIR, version)) throw e;
    }
    return LIB_DIR;
  } finally {
    fs.rmSync(tmpDir, { recursive: true, force: true });
    releaseLock();
  }
}

module.exports = { ensureKafkaJars, hasKafkaJars, kafkaVersion, LIB_DIR, INSTALL_HINT, FetchError };

if (require.main === module) {
  try {
    ensureKafkaJars();
  } catch (e) {
    process.stderr.write(`${e instanceof FetchError ? e.message : e.stack || e}\n`);
    process.exit(1);
  }
}
