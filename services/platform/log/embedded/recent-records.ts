import type { JournalRecord } from './frame';

/**
 * The newest records of a topic, so a reader in this process that follows close behind the writers
 * gets them without reading the disk. Kept only while such a reader exists: a record held this long
 * outlives the young generation, and promoting each one measurably slowed the receiver, which has no
 * reader of its own topic in its process (docs/benchmarks.md).
 */
export class RecentRecords {
  private readonly records: (JournalRecord | undefined)[];
  /** Which offset each slot holds; -1 for none. */
  private readonly offsets: Float64Array;
  private readers = 0;

  constructor(private readonly capacity: number) {
    this.records = new Array<JournalRecord | undefined>(capacity);
    this.offsets = new Float64Array(capacity).fill(-1);
  }

  /** A reader starts following the topic; call the returned function when it stops. */
  follow(): () => void {
    this.readers++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.readers === 0) {
        this.records.fill(undefined);
        this.offsets.fill(-1);
      }
    };
  }

  remember(offset: number, record: JournalRecord): void {
    if (this.readers === 0) return;
    const slot = offset % this.capacity;
    this.records[slot] = record;
    this.offsets[slot] = offset;
  }

  get(offset: number): JournalRecord | undefined {
    const slot = offset % this.capacity;
    return this.offsets[slot] === offset ? this.records[slot] : undefined;
  }
}
