import type { IngressErrorCode } from '../../answers';

/**
 * A signature's timestamp must be within `toleranceSeconds` of now, either way: too old is a replay of a
 * captured request, too new is one prepared in advance. Only whole seconds since the epoch, as every
 * scheme here sends them; anything else is simply wrong.
 */
export type TimestampVerdict = { ok: true } | { ok: false; code: IngressErrorCode; message?: string };

export function checkTimestamp(text: string, nowMs: number, toleranceSeconds: number): TimestampVerdict {
  if (!/^\d{1,12}$/.test(text.trim())) return { ok: false, code: 'authorization-wrong', message: 'The signature timestamp is not a whole number of seconds' };
  const skew = Math.abs(nowMs / 1000 - Number(text.trim()));
  return skew <= toleranceSeconds ? { ok: true } : { ok: false, code: 'timestamp-out-of-tolerance' };
}
