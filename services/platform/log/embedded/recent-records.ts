import type { JournalRecord } from './frame';

/**
 * The newest records of a topic, so a reader in this process that follows close behind the writers
 * gets them without reading the disk. Kept only while such a reader exists: a record held this long
 * outlives the young generation, and promoting each one measurably slowed the receiver, which has no
 * reader of its own topic in its process (docs/benchmarks.md).
 *
 * Bounded in bytes as well as in records: a decoded record or an execution request carries its body
 * inline (up to 8 MiB), and 2,048 of them held per topic grew a process by gigabytes under large uploads
 * (found by fuzzing, 2026-11-26). A record that does not fit is not kept, and its reader reads it from disk.
 */
export const RECENT_RECORDS_MAX_BYTES = 16 * 1024 * 1024;

export class RecentRecords {
  private readonly records: (JournalRecord | undefined)[];
  /** Which offset each slot holds; -1 for none. */
  private readonly offsets: Float64Array;
  private readers = 0;
  private bytes = 0;

  constructor(private readonly capacity: number, private readonly maxBytes = RECENT_RECORDS_MAX_BYTES) {
    this.records = new Array<JournalRecord | undefined>(capacity);
    this.offsets = new Float64Array(capacity).fill(-1);
  }

  /** What is held, in bytes of values. */
  get heldBytes(): number {
    return this.bytes;
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
        this.bytes = 0;
      }
    };
  }

  remember(offset: number, record: JournalRecord): void {
    if (this.readers === 0) return;
    const slot = offset % this.capacity;
    this.bytes -= this.records[slot]?.value.length ?? 0;
    if (this.bytes + record.value.length > this.maxBytes) {
      this.records[slot] = undefined;
      this.offsets[slot] = -1;
      return;
    }
    this.records[slot] = record;
    this.offsets[slot] = offset;
    this.bytes += record.value.length;
  }

  get(offset: number): JournalRecord | undefined {
    const slot = offset % this.capacity;
    return this.offsets[slot] === offset ? this.records[slot] : undefined;
  }
}
