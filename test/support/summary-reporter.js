'use strict';
/**
 * Prints one machine-readable line after the run (read by CI):
 *   Tests: <passed> passed, <failed> failed, <skipped> skipped
 * skipped = skipped/pending + todo tests. A test file that fails before any of its tests runs (a syntax error, a
 * setup that throws) counts as one failed test: jest counts none of its tests, and the line must not say
 * "0 failed" for a run that failed.
 */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const passed = results.numPassedTests || 0;
    const failed = (results.numFailedTests || 0) + (results.numRuntimeErrorTestSuites || 0);
    const skipped = (results.numPendingTests || 0) + (results.numTodoTests || 0);
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}

module.exports = SummaryReporter;
