'use strict';
/**
 * Preloaded into `ingress start` (`node --require`) by test/e2e/stage-threads.test.ts: in the main thread, every
 * callback added to an observable gauge is given a number, and each time a collection runs it, a line
 * `<gauge name> #<number>` is appended to GAUGE_CALLBACKS_FILE. Appended synchronously, so a scrape's lines are in
 * the file before its answer is: what the service's exporter reads, not merely what it shows (a callback left
 * behind by a worker that exited observes nothing, so the scraped text alone cannot tell it is still run).
 */
const { appendFileSync } = require('node:fs');
const { isMainThread } = require('node:worker_threads');

const file = process.env.GAUGE_CALLBACKS_FILE;
if (file && isMainThread) {
  const { metrics } = require('@opentelemetry/api');
  let numbered = 0;
  const gauge = (name, instrument) => {
    const wrapped = new Map();
    return new Proxy(instrument, {
      get(target, prop) {
        if (prop === 'addCallback') {
          return (callback) => {
            const number = ++numbered;
            const run = (result) => { appendFileSync(file, `${name} #${number}\n`); return callback(result); };
            wrapped.set(callback, run);
            target.addCallback(run);
          };
        }
        if (prop === 'removeCallback') return (callback) => target.removeCallback(wrapped.get(callback) ?? callback);
        const value = Reflect.get(target, prop);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  };
  const getMeter = metrics.getMeter.bind(metrics);
  metrics.getMeter = (...args) => new Proxy(getMeter(...args), {
    get(target, prop) {
      if (prop === 'createObservableGauge') return (name, options) => gauge(name, target.createObservableGauge(name, options));
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
