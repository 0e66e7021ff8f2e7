import type { IngressErrorCode } from '../../answers';
import { trimOws } from '../../ows';

/**
 * A signature's timestamp must be within `toleranceSeconds` of now, either way: too old is a replay of a
 * captured request, too new is one prepared in advance. Only whole seconds since the epoch, as every
 * scheme here sends them; anything else is simply wrong.
 */
export type TimestampVerdict = { ok: true } | { ok: false; code: IngressErrorCode; message?: string };

export function checkTimestamp(text: string, nowMs: number, toleranceSeconds: number): TimestampVerdict {
  // Only HTTP's white space (space, tab) is not part of it: trim() also took U+00A0 and other Unicode spaces, so
  // `1700000000<NBSP>`, signed as sent, passed for whole seconds (found by admin-auth-fuzz.test.ts).
  const seconds = trimOws(text);
  if (!/^\d{1,12}$/.test(seconds)) return { ok: false, code: 'authorization-wrong', message: 'The signature timestamp is not a whole number of seconds' };
  const skew = Math.abs(nowMs / 1000 - Number(seconds));
  return skew <= toleranceSeconds ? { ok: true } : { ok: false, code: 'timestamp-out-of-tolerance' };
}
