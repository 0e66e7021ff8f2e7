import type { Answer, IngressErrorCode } from '../answers';
import { EHUB_NS, SOAP11_NS, type FaultCode } from './send-stream';

/**
 * What the eAdaptor (a WCF client) expects back. Success: an envelope with an empty Body and a
 * WS-Security Timestamp in the header, sent only after the durable accept. Failure: a SOAP 1.1 Fault,
 * HTTP 500 as the SOAP HTTP binding requires; authentication failures keep 401/403 (SPEC §5) with a
 * Fault body, so both an HTTP client and a SOAP stack understand them.
 */
const WSU_NS = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd';
const WSSE_NS = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd';
const XML_HEADERS = { 'content-type': 'text/xml; charset=utf-8' };
const TIMESTAMP_LIFETIME_MS = 5 * 60 * 1000;

function escapeXml(value: string): string {
  return value.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c]!)
    // Characters XML 1.0 cannot carry at all.
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, '');
}

function envelope(body: string, now: number): string {
  const created = new Date(now).toISOString();
  const expires = new Date(now + TIMESTAMP_LIFETIME_MS).toISOString();
  return `<s:Envelope xmlns:s="${SOAP11_NS}" xmlns:u="${WSU_NS}"><s:Header>`
    + `<o:Security s:mustUnderstand="1" xmlns:o="${WSSE_NS}"><u:Timestamp u:Id="_0"><u:Created>${created}</u:Created><u:Expires>${expires}</u:Expires></u:Timestamp></o:Security>`
    + `</s:Header><s:Body>${body}</s:Body></s:Envelope>`;
}

export function sendStreamAccepted(now = Date.now()): Answer {
  return { status: 200, headers: XML_HEADERS, body: envelope('', now) };
}

export function pingAnswer(now = Date.now()): Answer {
  return { status: 200, headers: XML_HEADERS, body: envelope(`<PingResponse xmlns="${EHUB_NS}"><PingResult>true</PingResult></PingResponse>`, now) };
}

/**
 * Why a Fault was answered, for the request journal (Answer.code): an ingress error code where one says it,
 * else one of the logistics trigger's own. The faultcode (Client, Server) cannot tell a replayed token from a
 * bad envelope or an unknown SOAPAction.
 */
export type LogisticsFaultCode = IngressErrorCode | 'soap-action-unknown' | 'soap-version-mismatch' | 'token-replayed';

export interface FaultDetail {
  status: number;
  faultCode: FaultCode | 'Server';
  code: LogisticsFaultCode;
  message: string;
  trackingId?: string | null;
}

export function soapFault({ status, faultCode, code, message, trackingId }: FaultDetail): Answer {
  const text = trackingId ? `${message} (TrackingID ${trackingId})` : message;
  const body = `<s:Envelope xmlns:s="${SOAP11_NS}"><s:Body><s:Fault><faultcode>s:${faultCode}</faultcode><faultstring xml:lang="en">${escapeXml(text)}</faultstring>`
    + (trackingId ? `<detail><TrackingID xmlns="${EHUB_NS}">${escapeXml(trackingId)}</TrackingID></detail>` : '')
    + `</s:Fault></s:Body></s:Envelope>`;
  return { status, headers: XML_HEADERS, body, code };
}
