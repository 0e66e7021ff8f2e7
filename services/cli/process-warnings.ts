/**
 * kafkajs 2.2.4 sets a timer of `throttledUntil - Date.now()` ms whenever a request completes with none
 * pending (network/requestQueue, scheduleCheckPendingRequests): with no throttle `throttledUntil` is -1,
 * so the delay is about minus the epoch in ms. Node has always run such a timer after 1 ms; Node 23+ also
 * prints a TimeoutNegativeWarning, once per process (tulios/kafkajs#1751, fixes proposed in #1755 and #1768,
 * not released). Nothing our Kafka adapter passes changes it, so the warning is dropped here, and only
 * when kafkajs's request queue set the timer: a negative delay anywhere else still warns.
 *
 * Node prints warnings from its own 'warning' listener; this replaces that listener with one that hands
 * every other warning to it.
 */
const KAFKAJS_REQUEST_QUEUE = /[\\/]kafkajs[\\/]src[\\/]network[\\/]requestQueue[\\/]/;

export function isKafkajsNegativeTimeout(warning: Error): boolean {
  return warning.name === 'TimeoutNegativeWarning' && KAFKAJS_REQUEST_QUEUE.test(warning.stack ?? '');
}

let installed = false;

export function quietKafkajsNegativeTimeouts(target: NodeJS.Process = process): void {
  if (installed) return;
  installed = true;
  const printers = target.listeners('warning') as ((warning: Error) => void)[];
  for (const printer of printers) target.removeListener('warning', printer);
  target.on('warning', (warning: Error) => {
    if (isKafkajsNegativeTimeout(warning)) return;
    for (const printer of printers) printer.call(target, warning);
  });
}
