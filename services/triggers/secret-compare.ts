import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * Compare a presented secret with the expected one in time that does not depend on where they differ
 * or on the expected length: both are hashed first, so timingSafeEqual always sees 32 bytes.
 */
export function secretsEqual(presented: string | Buffer, expected: string | Buffer): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
