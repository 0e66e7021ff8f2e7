import type { StageHandle } from './event-log';

/**
 * Starts stages together, all or none. On Kafka a start returns once its consumer has joined its group: a
 * rebalance of a group that has members, which waits for their next heartbeats (docs/kafka.md, "How long a process
 * takes to join"). One after another, a process with the mdn stage and the journal (ten groups) took the sum of
 * those waits before it said it had started; together, about the longest of them.
 *
 * Every start is called before any is awaited. Once all have settled, if any failed, those that started are
 * stopped, one at a time in the order given, and the error of the first failed start in that order is thrown:
 * the same stages stopped, and the same error, whichever start happened to fail first. Waiting for the slowest
 * start, rather than throwing at the first failure, is what stops a stage that was still starting: nothing is
 * left running behind a rejected start. The handles come back in the order of `starts`.
 */
export async function startTogether(starts: readonly (() => Promise<StageHandle>)[]): Promise<StageHandle[]> {
  // Async, so that a start that throws at once is a rejection like the others, and does not leave them running.
  const settled = await Promise.allSettled(starts.map(async (start) => start()));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  const handles = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  if (!failed) return handles;
  for (const handle of handles) await handle.stop().catch(() => undefined);
  throw failed.reason;
}
