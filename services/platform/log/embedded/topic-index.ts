/** Where one record's bytes are in the journal. */
export interface SpanLocation {
  segment: number;
  position: number;
  length: number;
}

const INITIAL_CAPACITY = 1024;

/**
 * One topic's offsets → where each record is and when it was written, in typed arrays. An object per
 * record would live as long as the process: the garbage collector would promote each one and then mark
 * all of them in every full collection, a cost that grows with every record ever appended. Here a record
 * costs 24 bytes outside the collected heap, and a location object exists only while someone reads it.
 */
export class TopicIndex {
  private segments = new Uint32Array(INITIAL_CAPACITY);
  private lengths = new Uint32Array(INITIAL_CAPACITY);
  // Doubles: positions and epoch-millisecond timestamps outgrow 32 bits.
  private positions = new Float64Array(INITIAL_CAPACITY);
  private timestamps = new Float64Array(INITIAL_CAPACITY);
  private count = 0;

  /** The next offset: how many records the topic has. */
  get length(): number {
    return this.count;
  }

  push(segment: number, position: number, length: number, timestamp: number): void {
    if (this.count === this.segments.length) this.grow();
    const i = this.count++;
    this.segments[i] = segment;
    this.positions[i] = position;
    this.lengths[i] = length;
    this.timestamps[i] = timestamp;
  }

  at(offset: number): SpanLocation {
    if (!(offset >= 0 && offset < this.count)) throw new RangeError(`offset ${offset} is outside 0..${this.count - 1}`);
    return { segment: this.segments[offset], position: this.positions[offset], length: this.lengths[offset] };
  }

  /**
   * Where a batch from `from` (and before `to`) ends when its records may take `maxBytes` together, by the lengths
   * known before reading any of them. Never before `from + 1`: a record larger than `maxBytes` makes a batch alone.
   */
  endWithin(from: number, to: number, maxBytes: number): number {
    let end = from;
    let bytes = 0;
    while (end < to && (end === from || bytes + this.lengths[end] <= maxBytes)) bytes += this.lengths[end++];
    return end;
  }

  /** The first offset whose timestamp is at or after `timestamp` (they only grow within a topic), else the length. */
  firstAtOrAfter(timestamp: number): number {
    let lo = 0, hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.timestamps[mid] < timestamp) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  private grow() {
    const capacity = this.segments.length * 2;
    const widen = <T extends Uint32Array | Float64Array>(old: T, fresh: T): T => { fresh.set(old); return fresh; };
    this.segments = widen(this.segments, new Uint32Array(capacity));
    this.lengths = widen(this.lengths, new Uint32Array(capacity));
    this.positions = widen(this.positions, new Float64Array(capacity));
    this.timestamps = widen(this.timestamps, new Float64Array(capacity));
  }
}
