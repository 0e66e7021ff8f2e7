import { As2Fault } from './faults';
import type { As2Parameters } from './parameters';

/**
 * The envelope checks of SPEC §4.2.4 and §7, on headers alone: Message-Id, AS2-From and AS2-To are
 * required (400 with a failure MDN); the pinned Expected AS2-From is compared exactly and Expected AS2-To
 * after removing the quotes AS2 allows around names with spaces (authentication-failed). An asynchronous
 * MDN's URL is checked in async-mdn.ts, once the credential is read.
 */
export function envelopeFault(headers: Record<string, string>, params: As2Parameters): As2Fault | null {
  const missing = ['message-id', 'as2-from', 'as2-to'].filter((h) => !headers[h]?.trim());
  if (missing.length) return new As2Fault('missing-header', `the required header(s) ${missing.map(headerName).join(', ')} are missing`);
  if (params.expectedAs2From !== null && headers['as2-from'] !== params.expectedAs2From) return new As2Fault('authentication-failed', 'AS2-From is not the partner this trigger expects');
  if (params.expectedAs2To !== null && unquote(headers['as2-to']) !== unquote(params.expectedAs2To)) return new As2Fault('authentication-failed', 'AS2-To is not this receiver');
  return null;
}

const HEADER_NAMES: Record<string, string> = { 'message-id': 'Message-Id', 'as2-from': 'AS2-From', 'as2-to': 'AS2-To' };
const headerName = (h: string) => HEADER_NAMES[h] ?? h;
const unquote = (v: string) => v.trim().replace(/^"(.*)"$/, '$1');
