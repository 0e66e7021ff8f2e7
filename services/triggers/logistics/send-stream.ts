import { isUtf8 } from 'node:buffer';
import { gunzipSync } from 'node:zlib';
import { isObject, localName, parseXml, rootOf, type ParseBudget, type XmlObject, type XmlValue } from './xml';

/**
 * The eAdaptor's SOAP 1.1 SendStreamRequest (DESIGN.md §6): Envelope/Body/SendStreamRequest/Payload/
 * Message*, each Message base64 of gzip of one XML document. Namespaces of the envelope and the request
 * are checked; whitespace inside the base64 is allowed. Every fault names the Message's TrackingID, so
 * the platform's operators can find the message that failed.
 */
export const SOAP11_NS = 'http://schemas.xmlsoap.org/soap/envelope/';
export const EHUB_NS = 'http://CargoWise.com/eHub/2010/06';
export const WSSE_NS = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd';
export const SOAP_ACTIONS = {
  sendStream: `${EHUB_NS}/eAdapterStreamedService/SendStream`,
  ping: `${EHUB_NS}/eAdapterStreamedService/Ping`,
} as const;

export type FaultCode = 'Client' | 'VersionMismatch';

export class SendStreamError extends Error {
  constructor(message: string, readonly trackingId: string | null = null, readonly faultCode: FaultCode = 'Client') {
    super(message);
    this.name = 'SendStreamError';
  }
}

export interface StreamMessage {
  index: number;
  /** The Message element's attributes (ApplicationCode, ClientID, TrackingID, SchemaName, …) as sent. */
  attributes: Record<string, string>;
  trackingId: string | null;
  /** The decoded document. */
  xml: string;
}

export interface UsernameToken {
  username: string;
  password: string;
  passwordType: 'text' | 'digest';
  nonce: string | null;
  created: string | null;
}

export interface SendStreamRequest {
  /** `h:SendStreamRequestTrackingID` of the header, when sent. */
  requestTrackingId: string | null;
  usernameToken: UsernameToken | null;
  messages: StreamMessage[];
}

export interface SendStreamLimits {
  /** Inflated bytes of all Messages of one request together. */
  maxInflatedBytes: number;
  maxMessages: number;
  /** Parse units (elements, attributes, references, text) of the envelope and all documents of one request together (see ParseBudget). */
  maxParseUnits: number;
}

/** What one request may still inflate and parse. */
export interface RequestBudget extends ParseBudget {
  inflatedBytes: number;
}

export const requestBudget = (limits: SendStreamLimits): RequestBudget => ({ inflatedBytes: limits.maxInflatedBytes, units: limits.maxParseUnits });

/**
 * The namespace declarations an element sees: its own, then its ancestors', as a chain. A child that
 * declares a prefix adds one link instead of copying what its parent sees: copying made a few hundred
 * KB of declarations on sibling elements cost seconds of parsing (declarations × siblings).
 */
interface Scope {
  readonly own: ReadonlyMap<string, string> | null;
  readonly parent: Scope | null;
}

const NO_DECLARATIONS: Scope = { own: null, parent: null };

function scopeOf(element: XmlValue, parent: Scope): Scope {
  if (!isObject(element)) return parent;
  let own: Map<string, string> | null = null;
  for (const key of Object.keys(element)) {
    if (key === '@xmlns' || key.startsWith('@xmlns:')) (own ??= new Map()).set(key === '@xmlns' ? '' : key.slice(7), String(element[key]));
  }
  return own ? { own, parent } : parent;
}

function namespaceOf(name: string, scope: Scope): string | undefined {
  const colon = name.indexOf(':');
  const prefix = colon < 0 ? '' : name.slice(0, colon);
  for (let s: Scope | null = scope; s; s = s.parent) {
    const ns = s.own?.get(prefix);
    if (ns !== undefined) return ns;
  }
  return undefined;
}

/** Child elements named `local` in `ns`, in document order, with the scope each one sees. */
function children(element: XmlValue, scope: Scope, ns: string, local: string): { value: XmlValue; scope: Scope }[] {
  if (!isObject(element)) return [];
  const found: { value: XmlValue; scope: Scope }[] = [];
  for (const [key, value] of Object.entries(element)) {
    if (key.startsWith('@') || key === '#text' || localName(key) !== local) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      const inner = scopeOf(item, scope);
      if (namespaceOf(key, inner) === ns) found.push({ value: item, scope: inner });
    }
  }
  return found;
}

function one(element: XmlValue, scope: Scope, ns: string, local: string, what: string): { value: XmlValue; scope: Scope } {
  const found = children(element, scope, ns, local);
  if (found.length !== 1) throw new SendStreamError(found.length === 0 ? `the envelope has no ${what}` : `the envelope has more than one ${what}`);
  return found[0];
}

function text(value: XmlValue | undefined): string {
  if (typeof value === 'string') return value;
  if (isObject(value) && typeof value['#text'] === 'string') return value['#text'];
  return '';
}

function attributes(value: XmlValue): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isObject(value)) return out;
  // Only `xmlns` and `xmlns:*` are declarations (Namespaces in XML §3); `xmlnsFoo` or `xmlns-x` is an attribute.
  for (const [key, v] of Object.entries(value)) if (key.startsWith('@') && key !== '@xmlns' && !key.startsWith('@xmlns:')) out[localName(key.slice(1))] = String(v);
  return out;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function decodeMessage(value: XmlValue, index: number, budget: RequestBudget): StreamMessage {
  const attrs = attributes(value);
  const trackingId = attrs.TrackingID || null;
  const encoded = text(value).replace(/\s+/g, '');
  if (encoded === '') throw new SendStreamError(`Message ${index + 1} is empty`, trackingId);
  if (encoded.length % 4 !== 0 || !BASE64.test(encoded)) throw new SendStreamError(`Message ${index + 1} is not valid base64`, trackingId);
  const gzipped = Buffer.from(encoded, 'base64');
  if (gzipped.length < 18 || gzipped[0] !== 0x1f || gzipped[1] !== 0x8b) throw new SendStreamError(`Message ${index + 1} is not gzip data`, trackingId);
  const tooLarge = () => new SendStreamError(`Message ${index + 1} inflates beyond the limit of this service`, trackingId);
  let inflated: Buffer;
  try {
    // zlib takes no limit below 1 byte: a spent budget is checked against what came out instead.
    inflated = gunzipSync(gzipped, { maxOutputLength: Math.max(1, budget.inflatedBytes) });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) throw tooLarge();
    throw new SendStreamError(`Message ${index + 1} is not valid gzip data`, trackingId);
  }
  if (inflated.length > budget.inflatedBytes) throw tooLarge();
  budget.inflatedBytes -= inflated.length;
  let xml: string;
  try { xml = documentText(inflated); } catch (error) { throw new SendStreamError(`Message ${index + 1} ${(error as Error).message}`, trackingId); }
  return { index, attributes: attrs, trackingId, xml };
}

/** The encoding an XML declaration names (it stands first, in ASCII, when the document is not UTF-16). */
const DECLARED_ENCODING = /^<\?xml\s[^>]*?\bencoding\s*=\s*["']([A-Za-z][A-Za-z0-9._-]*)["']/;

/**
 * A document's text as XML 1.0 §4.3.3 and Appendix F read it: UTF-16 when a byte order mark says so; else the
 * encoding its declaration names, UTF-8 when it names none. Bytes that are not valid in that encoding are a
 * fatal error there, not characters to replace: they would reach the workflow as U+FFFD, silently.
 */
function documentText(bytes: Buffer): string {
  const le = bytes[0] === 0xff && bytes[1] === 0xfe;
  if (le || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    if (bytes.length % 2 !== 0) throw new Error('is not valid UTF-16 text');
    return le ? bytes.subarray(2).toString('utf16le') : Buffer.from(bytes.subarray(2)).swap16().toString('utf16le');
  }
  const utf8Mark = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;
  const body = utf8Mark ? bytes.subarray(3) : bytes;
  const declared = DECLARED_ENCODING.exec(body.toString('latin1', 0, Math.min(body.length, 256)))?.[1].toLowerCase();
  if (declared === undefined || declared === 'utf-8' || declared === 'utf8') {
    if (!isUtf8(body)) throw new Error('is not valid UTF-8 text');
    return body.toString('utf8');
  }
  if (utf8Mark) throw new Error(`starts with a UTF-8 byte order mark but declares ${declared}`);
  if (declared.startsWith('utf-16') || declared.startsWith('utf16')) throw new Error(`declares ${declared} but has no byte order mark`);
  let decoder: InstanceType<typeof TextDecoder>;
  try { decoder = new TextDecoder(declared, { fatal: true }); } catch { throw new Error(`declares an encoding this service cannot read (${declared})`); }
  try { return decoder.decode(body); } catch { throw new Error(`is not valid ${declared} text`); }
}

export interface Envelope {
  header: { value: XmlValue; scope: Scope } | undefined;
  body: { value: XmlValue; scope: Scope };
}

/** A SOAP 1.1 envelope: its Header (if any) and Body, with the namespaces in scope. */
export function readEnvelope(text: string, validate: boolean, budget: ParseBudget): Envelope {
  let doc: XmlObject;
  try {
    doc = parseXml(text, 'qualified', validate, budget);
  } catch (error) {
    throw new SendStreamError(`the envelope is ${(error as Error).message}`);
  }
  let rootName: string;
  let root: XmlValue;
  try { [rootName, root] = rootOf(doc); } catch (error) { throw new SendStreamError(`the envelope: ${(error as Error).message}`); }
  const scope = scopeOf(root, NO_DECLARATIONS);
  if (localName(rootName) !== 'Envelope') throw new SendStreamError('the document is not a SOAP envelope');
  if (namespaceOf(rootName, scope) !== SOAP11_NS) throw new SendStreamError('the envelope is not SOAP 1.1', null, 'VersionMismatch');
  return { header: children(root, scope, SOAP11_NS, 'Header')[0], body: one(root, scope, SOAP11_NS, 'Body', 'Body') };
}

/** The WS-Security UsernameToken of the envelope's header, if it has one. */
export function usernameTokenOf(envelope: Envelope): UsernameToken | null {
  const header = envelope.header;
  if (!header) return null;
  const security = children(header.value, header.scope, WSSE_NS, 'Security')[0];
  if (!security) return null;
  const token = children(security.value, security.scope, WSSE_NS, 'UsernameToken')[0];
  if (!token) return null;
  const password = children(token.value, token.scope, WSSE_NS, 'Password')[0];
  const type = password ? attributes(password.value).Type ?? '' : '';
  const nonce = children(token.value, token.scope, WSSE_NS, 'Nonce')[0];
  // Created is in the wsu namespace on the wire, in wsse in some clients: the local name decides.
  const created = Object.entries(isObject(token.value) ? token.value : {}).find(([k]) => localName(k) === 'Created');
  return {
    username: text(children(token.value, token.scope, WSSE_NS, 'Username')[0]?.value),
    password: password ? text(password.value) : '',
    passwordType: type.endsWith('#PasswordDigest') ? 'digest' : 'text',
    nonce: nonce ? text(nonce.value) : null,
    created: created ? text(created[1]) : null,
  };
}

/**
 * The Messages of a SendStreamRequest envelope, decoded (base64, gzip) within the request's budget.
 * The documents are not parsed here (unwrapUniversal does that, within the same budget).
 */
export function sendStreamOf(envelope: Envelope, limits: SendStreamLimits, budget: RequestBudget): SendStreamRequest {
  const request = one(envelope.body.value, envelope.body.scope, EHUB_NS, 'SendStreamRequest', `SendStreamRequest in ${EHUB_NS}`);
  const payload = one(request.value, request.scope, EHUB_NS, 'Payload', 'Payload');
  const messages = children(payload.value, payload.scope, EHUB_NS, 'Message');
  if (messages.length === 0) throw new SendStreamError('the Payload has no Message');
  if (messages.length > limits.maxMessages) throw new SendStreamError(`the Payload has more than ${limits.maxMessages} Messages`);
  const header = envelope.header;
  const trackingHeader = header ? children(header.value, header.scope, EHUB_NS, 'SendStreamRequestTrackingID')[0] : undefined;
  return {
    requestTrackingId: trackingHeader ? text(trackingHeader.value) || null : null,
    usernameToken: usernameTokenOf(envelope),
    messages: messages.map((m, index) => decodeMessage(m.value, index, budget)),
  };
}

/**
 * Read a SendStreamRequest. `validate` checks well-formedness of the envelope (the documents are checked
 * by unwrapUniversal); the receiver validates, the decoder (reading what the receiver accepted) need not.
 */
export function readSendStream(text_: string, limits: SendStreamLimits, validate: boolean, budget: RequestBudget = requestBudget(limits)): SendStreamRequest {
  return sendStreamOf(readEnvelope(text_, validate, budget), limits, budget);
}
