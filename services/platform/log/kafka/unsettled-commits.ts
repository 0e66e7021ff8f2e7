/**
 * The committed hooks (StageBatchResult.committed) of transactions whose outcome is unknown: EndTxn failed, so
 * the transaction may have landed or not. Kept per partition with the offset the transaction committed; the
 * committed offset read when the partition is owned anew decides. At or past it, the transaction landed (no
 * later one of this partition could have committed the same records again, since no other member owned it in
 * between: a hook is held only while its ownership is current and unfenced, and all are forgotten when the
 * partition goes elsewhere or this member is expelled, transactional-stage.ts) and the hook runs: otherwise the
 * records were handed over no more, and a dead letter among them was never logged, counted or forgotten. Before
 * it, nothing landed: the hook is dropped, and the records, handed over again, make their outcome (and its hook)
 * again.
 */
export class UnsettledCommits {
  private readonly held = new Map<number, { next: bigint; hook: () => void }[]>();

  /** `next`: the input offset the transaction committed (the one after its last record). */
  hold(partition: number, next: string, hook: () => void): void {
    const list = this.held.get(partition) ?? [];
    list.push({ next: BigInt(next), hook });
    this.held.set(partition, list);
  }

  /** The partition's committed offset, read after its producer was initialised (every earlier transaction settled). */
  settle(partition: number, committed: string, run: (hook: () => void) => void): void {
    const list = this.held.get(partition);
    if (!list) return;
    this.held.delete(partition);
    const offset = BigInt(committed);
    for (const { next, hook } of list) if (offset >= next) run(hook);
  }

  /**
   * The partition went to another member: what its transaction did is that member's to find, and this member
   * cannot tell any more (a letter of it may then go unlogged: docs/operations.md "Dead letters").
   */
  forget(partition: number): void {
    this.held.delete(partition);
  }

  holds(partition: number): boolean {
    return this.held.has(partition);
  }

  partitions(): number[] {
    return [...this.held.keys()];
  }

  clear(): void {
    this.held.clear();
  }
}
