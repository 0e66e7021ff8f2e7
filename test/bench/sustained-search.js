// The sustained end-to-end rate: the highest offered rate at which accepts and executions keep pace. Each step
// offers a fixed rate (autocannon's overallRate) for a window and reads the backlog from the log in the middle
// and at the end of it; the backlog may wobble by a few stage batches, but must not grow.
const { cpuMicros, fire } = require('./support');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The stages take records in batches of up to 256 and three of them stand between an accept and its
// execution record, so even a pipeline that keeps pace shows a backlog that moves by about that much
// between two looks.
const BATCH_WOBBLE = 3 * 256;
// The stages' lag sums about six groups (sampler and the journal's one group per topic included), each of which
// can hold a batch in hand and have the next one waiting.
const LAG_WOBBLE = 6 * 2 * 256;
// A deficit this small (2% of the offered rate over half the window) is within what one window can tell.
const DEFICIT = 0.02;
// autocannon releases each connection's quota at the start of every second, so its rate over a window
// drifts by a few percent from the one asked.
const ACCEPT_SHORTFALL = 0.1;

/** Whether a step kept pace: accepts at the offered rate, and neither the backlog nor the stages' lag grew. */
function keptPace(step) {
  const tolerance = Math.max(BATCH_WOBBLE, DEFICIT * step.rate * (step.seconds / 2));
  const reasons = [];
  if (step.acceptRate < (1 - ACCEPT_SHORTFALL) * step.rate) reasons.push(`accepts ${Math.round(step.acceptRate)}/s`);
  if (step.end.backlog > step.mid.backlog + tolerance) reasons.push(`backlog ${step.mid.backlog} → ${step.end.backlog}`);
  if (step.end.lag > step.mid.lag + Math.max(LAG_WOBBLE, 2 * tolerance)) reasons.push(`stages' lag ${step.mid.lag} → ${step.end.lag}`);
  return { ok: reasons.length === 0, reasons };
}

/** One window at `rate`: load, the backlog at its middle and end, the CPU each of `pids` spent per accept. */
async function measureStep({ url, rate, seconds, connections, body, headers, probe, pids }) {
  const cpuBefore = pids.map(cpuMicros);
  const midpoint = sleep(seconds * 500).then(() => probe.snapshot());
  const load = await fire(url, { seconds, connections, body, headers, overallRate: rate });
  const end = await probe.snapshot();
  const mid = await midpoint;
  if (load.non2xx > 0 || load.errors > 0) throw new Error(`at ${rate} req/s ${load.non2xx} answers were not 2xx and ${load.errors} failed; the run is void`);
  return {
    rate, seconds, accepted: load.ok, acceptRate: load.ok / load.seconds, p50: load.p50, p99: load.p99, mid, end,
    cpuPerRequest: pids.map((pid, i) => (cpuMicros(pid) - cpuBefore[i]) / load.ok),
  };
}

/**
 * From `start` req/s down by 10% a step until one keeps pace, then two halvings of the gap above it.
 * `step(rate)` measures, `settle()` waits until the backlog is gone (so each step starts level) and resolves
 * with the seconds that took. Resolves with the best step that kept pace, its drain time, and every step.
 */
async function searchSustainedRate({ start, step, settle, note = () => undefined }) {
  const steps = [];
  let best = null;
  let above = null;
  const tryRate = async (rate) => {
    const s = await step(Math.round(rate));
    s.verdict = keptPace(s);
    s.drain = await settle();
    steps.push(s);
    note(`${s.rate} req/s: ${s.verdict.ok ? 'kept pace' : `fell behind (${s.verdict.reasons.join(', ')})`}; backlog drained in ${s.drain.backlogSeconds.toFixed(1)} s, every stage in ${s.drain.allSeconds.toFixed(1)} s`);
    return s;
  };
  for (let rate = start; !best; rate *= 0.9) {
    if (steps.length >= 15) throw new Error(`no rate from ${start} req/s down to ${Math.round(rate)} kept pace`);
    const s = await tryRate(rate);
    if (s.verdict.ok) best = s; else above = s.rate;
  }
  for (let i = 0; i < 2 && above !== null && above - best.rate > best.rate * 0.02; i++) {
    const s = await tryRate((best.rate + above) / 2);
    if (s.verdict.ok) best = s; else above = s.rate;
  }
  return { best, steps };
}

module.exports = { keptPace, measureStep, searchSustainedRate };
