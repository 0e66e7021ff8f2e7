/**
 * The frames queued for the journal's next write, encoded in place one after another in one buffer.
 * An append then allocates no frame of its own and a write needs no concatenation; a written buffer
 * comes back for reuse. On the accept path that was two buffers per request and one per write.
 */
export class FrameAssembly {
  private buffer: Buffer;
  private used = 0;
  private readonly spare: Buffer[] = [];

  constructor(
    private readonly initialBytes = 256 * 1024,
    /** Larger buffers (grown for a big record) are dropped after their write rather than kept. */
    private readonly keepBytes = 4 * 1024 * 1024,
    private readonly keepCount = 4,
  ) {
    this.buffer = Buffer.allocUnsafe(initialBytes);
  }

  /** The buffer that reserve()'s offsets refer to (it changes when it grows or is taken). */
  get current(): Buffer {
    return this.buffer;
  }

  /**
   * Room for `size` more bytes in `current`, at the returned offset. Nothing counts as assembled until
   * commit(), so a frame that fails half-written leaves no trace.
   */
  reserve(size: number): number {
    if (this.buffer.length - this.used < size) {
      const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.used + size));
      this.buffer.copy(grown, 0, 0, this.used);
      this.buffer = grown;
    }
    return this.used;
  }

  commit(size: number): void {
    this.used += size;
  }

  /** Everything assembled, for one write; the next frames go to another buffer. Hand `storage` back to recycle() once written. */
  take(): { bytes: Buffer; storage: Buffer } {
    const storage = this.buffer;
    const bytes = storage.subarray(0, this.used);
    this.buffer = this.spare.pop() ?? Buffer.allocUnsafe(this.initialBytes);
    this.used = 0;
    return { bytes, storage };
  }

  /** A buffer whose write has finished (successfully or not): nothing reads it any more. */
  recycle(storage: Buffer): void {
    if (storage.length <= this.keepBytes && this.spare.length < this.keepCount) this.spare.push(storage);
  }
}
