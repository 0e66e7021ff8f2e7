import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { deflateRawSync, gzipSync } from 'node:zlib';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import type { Received } from '../../services/platform/avro/records';
import { MAX_RECORD_BYTES } from '../../services/platform/log/event-log';
import type { CredentialDocument, WorkflowNode } from '../../services/platform/registry/documents';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import type { ObjectStore } from '../../services/platform/store/object-store';
import { bodyServices } from '../../services/decoder/decoder';
import type { Answer } from '../../services/triggers/answers';
import { IngressError } from '../../services/triggers/answers';
import { createLogisticsTrigger, DEFAULT_LOGISTICS_LIMITS } from '../../services/triggers/logistics/logistics-trigger';
import { unwrapUniversal } from '../../services/triggers/logistics/universal';
import type { InboundRequest, TriggerPlugin, TriggerServices } from '../../services/triggers/trigger';
import { createWarehouseTrigger } from '../../services/triggers/warehouse/warehouse-trigger';
import { eventDocument, PING_ACTION, SEND_STREAM_ACTION, shipmentDocument, transactionDocument } from '../fixtures/cargowise';
import { dcPost, rcPost } from '../fixtures/warehouse';
import { caseSeed, fuzzSettings, prng, type Rng } from '../support/prng';

/**
 * Seeded property tests of the logistics and warehouse triggers' input, through the steps the receiver runs
 * (admit, the streaming validator in random chunks, inspect, accepted) and then the decoder's (decode, the
 * Decoded record's size). The promise under test: every malformed request gets a precise answer (its status, a
 * SOAP Fault or the JSON error, in words of our own, never a password), nothing throws, hangs or is dropped
 * silently; and a request answered 200 decodes, within one record.
 *
 * FUZZ_CASES=5000 (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE.
 */
const { seed: SEED, cases: CASES, only: ONLY_CASE } = fuzzSettings(100);
/** Warehouse posts cost a fraction of a SOAP request: more of them in the same time. */
const WAREHOUSE_CASES = Number(process.env.FUZZ_CASES ?? 400);

const quiet = { enabled: () => false, debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as TriggerServices['logger'];
const USER = 'freight-user';
const PASSWORD = 'pw-Zq7!secret';
const CREDENTIAL: CredentialDocument = { id: 'cred-ws', type: 'basicAuth', data: { user: USER, password: PASSWORD } };
/** What the receiver keeps inline in the record; larger bodies go to the object store (INLINE_BODY_MAX's default). */
const INLINE_MAX = 256 * 1024;
const HANG_MS = 20_000;

let store: ObjectStore;
let dir: string;
let running: string | null = null;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'trigger-fuzz-'));
  store = await openFilesystemStore(dir);
});
afterAll(async () => {
  if (running) console.error(`the trigger fuzz stopped in ${running}`);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function settles<T>(what: string, promise: Promise<T> | T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not settle in ${HANG_MS} ms`)), HANG_MS); });
  return Promise.race([Promise.resolve(promise), hang]).finally(() => clearTimeout(timer));
}

function chunked(rng: Rng, bytes: Buffer): Buffer[] {
  const mode = rng.int(0, 3);
  if (mode === 0 || bytes.length === 0) return [bytes];
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length;) {
    const size = mode === 1 ? rng.int(1, 16) : mode === 2 ? rng.int(1, 4096) : rng.int(1, Math.max(1, bytes.length));
    chunks.push(bytes.subarray(at, at + size));
    at += size;
  }
  return chunks;
}

type Verdict =
  | { accepted: false; answer: Answer; where: string }
  | { accepted: true; answer: Answer; kept: Buffer };

/** The receiver's steps for one request, in its order (services/receiver/receiver.ts), the body in `chunks`. */
async function receive(plugin: TriggerPlugin, request: InboundRequest, node: WorkflowNode, chunks: Buffer[], services: TriggerServices): Promise<Verdict> {
  const admission = await plugin.admit(request, node, services);
  if (!admission.ok) return { accepted: false, answer: admission.answer, where: 'admit' };
  const validator = plugin.validator?.(request, node) ?? null;
  let size = 0;
  for (const chunk of chunks) {
    size += chunk.length;
    if (validator && !validator.write(chunk)) await new Promise<void>((resolve) => { validator.once('drain', resolve); });
  }
  const refused = validator ? await validator.end() : null;
  if (refused) return { accepted: false, answer: refused, where: 'validator' };
  const whole = Buffer.concat(chunks);
  const body = { size, sha256: () => createHash('sha256').update(whole).digest('hex'), inline: validator?.holdsWhole ? null : whole, readStaged: null };
  const inspected = await plugin.inspect(request, node, body, services);
  if (!inspected.ok) return { accepted: false, answer: inspected.answer, where: 'inspect' };
  const kept = inspected.inspection.persistBody ?? body.inline;
  if (!kept) throw new Error('accepted with no body to keep');
  return { accepted: true, answer: await plugin.accepted(request, node, body, inspected.inspection, services), kept };
}

/** The decoder's steps for what the receiver kept: the body inline or in the store, decode, the Decoded record. */
async function decodeKept(plugin: TriggerPlugin, request: InboundRequest, node: WorkflowNode, kept: Buffer, kind: Received['triggerKind']) {
  let body: Received['body'];
  if (kept.length <= INLINE_MAX) body = { kind: 'inline', data: kept };
  else {
    const stored = await store.put(`raw/${request.workflowId}/${request.requestId}`, kept);
    body = { kind: 'ref', path: `raw/${request.workflowId}/${request.requestId}`, size: stored.size, sha256: stored.sha256 };
  }
  const received = {
    requestId: request.requestId, workflowId: request.workflowId, triggerNode: node.name, triggerKind: kind, pathSuffix: null, query: {},
    headers: {}, contentType: null, body, receivedAt: request.receivedAt, principal: null, remoteAddress: null, as2: null, traceparent: null,
    idempotencyKey: null, duplicateOf: null,
  } as Received;
  const items = await plugin.decode(received, node, bodyServices(store, quiet));
  const record = defaultAvroCodec().encode('Decoded', {
    requestId: received.requestId, workflowId: received.workflowId, triggerNode: received.triggerNode, triggerKind: kind,
    pathSuffix: null, receivedAt: received.receivedAt, items, duplicateOf: null,
  });
  return { items, recordBytes: record.length };
}

const requestOf = (n: number, headers: Record<string, string>, suffix = ''): InboundRequest => ({
  requestId: `r-${SEED}-${n}${suffix}`, workflowId: 'wf-fuzz', pathSuffix: null, query: {}, headers, remoteAddress: null, receivedAt: Date.now(),
});

// ---------------------------------------------------------------------------------------------------------------
// Logistics requests.

const SOAP = 'http://schemas.xmlsoap.org/soap/envelope/';
const EHUB = 'http://CargoWise.com/eHub/2010/06';
const WSSE = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd';
const WSU = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd';
const DIGEST = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordDigest';
const TEXT = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText';

interface Doc { xml: string; raw?: Buffer; mutation: string | null }
interface LogisticsCase {
  envelope: Buffer;
  soapAction: string | undefined;
  auth: 'none' | 'wsUsernameToken';
  rawBody: boolean;
  actions: string[];
  /** Each Message's document as sent, when it went in unchanged (null: mutated). */
  docs: Doc[];
  mutations: string[];
  /** The token carries the right password and a fresh, well-formed digest (when digest). */
  goodToken: boolean;
  /** Send the same bytes again after an accept (a replay). */
  replay: boolean;
}

function deepNesting(rng: Rng): string {
  const depth = rng.pick([100, 509, 510, 511, 512, 513, 600, 2000]);
  return `<UniversalEvent><Event>${'<a>'.repeat(depth)}x${'</a>'.repeat(depth)}</Event></UniversalEvent>`;
}

/** A document of the platform's, or a mutation of one (the mutation named). */
function document(rng: Rng): Doc {
  const base = rng.pick([() => eventDocument({ contexts: rng.int(0, 3) }), () => eventDocument({ interchange: false }), () => shipmentDocument({ many: rng.chance(0.5) }), () => shipmentDocument({ consol: true }), transactionDocument])();
  if (!rng.chance(0.55)) return { xml: base, mutation: null };
  const at = rng.int(0, base.length);
  const kinds: Array<[string, () => Doc]> = [
    ['truncated', () => ({ xml: base.slice(0, at), mutation: `truncated at ${at}` })],
    ['unclosed', () => ({ xml: base.replace('</Event>', '').replace('</Shipment>', ''), mutation: 'an element left open' })],
    ['mismatched', () => ({ xml: base.replace('</EventType>', '</EventTyp>').replace('</VesselName>', '</Vessel>'), mutation: 'mismatched end tag' })],
    ['deep', () => ({ xml: deepNesting(rng), mutation: 'deep nesting' })],
    ['attributes', () => { const n = rng.pick([10, 256, 257, 1000, 30000]); return { xml: base.replace('<Event>', `<Event ${Array.from({ length: n }, (_, i) => `a${i}="${i}"`).join(' ')}>`).replace('<Shipment>', `<Shipment ${Array.from({ length: n }, (_, i) => `b${i}="v"`).join(' ')}>`), mutation: `${n} attributes` }; }],
    ['duplicate attribute', () => ({ xml: base.replace('<Event>', '<Event a="1" a="2">').replace('<Shipment>', '<Shipment a="1" a="2">'), mutation: 'a repeated attribute' })],
    ['same local name', () => { const attrs = rng.pick(['a:Ref="1" b:Ref="2" xmlns:a="x" xmlns:b="y"', 'xml:lang="en" lang="fr"', 'xmlns:a="x" a="1" a:b="2"']); return { xml: base.replace('<Event>', `<Event ${attrs}>`).replace('<Shipment>', `<Shipment ${attrs}>`), mutation: 'attributes sharing a local name (or a declaration\'s)' }; }],
    ['doctype', () => ({ xml: `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;">]>${base.replace(/^<\?xml[^>]*\?>/, '').replace('<EventType>GIN', '<EventType>&lol2;')}`, mutation: 'billion laughs' })],
    ['external', () => ({ xml: `<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]>${base.replace(/^<\?xml[^>]*\?>/, '')}`, mutation: 'external entity' })],
    ['entity', () => ({ xml: base.replace('GIN', rng.pick(['&foo;', '&nbsp;', '&#0;', '&#x110000;', '&#xD800;', '&amp;&lt;&#65;&#x42;', '&', '&#;', '&#x;', '&amp', '&#65', '&#9999999999999999999;'])), mutation: 'a reference' })],
    ['cdata', () => ({ xml: base.replace('GIN', rng.pick(['<![CDATA[<x>&foo;</y>]]>', ']]>', '<![CDATA[unclosed', '<!-- a -- b -->', '<!-- </Event> -->', '<?pi x?>'])), mutation: 'CDATA, comment or PI' })],
    ['prefix', () => ({ xml: base.replace(/<(\/?)(Event|Shipment)\b/g, `<$1${rng.pick(['q', 'xmlns', 'a:b'])}:$2`), mutation: 'an unbound prefix' })],
    ['names', () => ({ xml: `<UniversalInterchange><Body><${rng.pick(['toString', 'hasOwnProperty', 'valueOf', '__proto__', 'constructor', 'prototype', '__defineGetter__'])}><undefined>x</undefined><Event>y</Event></${'X'}></Body></UniversalInterchange>`.replace(/<\/X>/, (m) => m), mutation: 'a name of Object.prototype' })],
    ['bom', () => ({ xml: base, raw: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(base)]), mutation: 'a UTF-8 BOM' })],
    ['utf16', () => { const le = rng.chance(0.5); const body = Buffer.from(base.replace('encoding="utf-8"', 'encoding="utf-16"'), 'utf16le'); const raw = Buffer.concat([le ? Buffer.from([0xff, 0xfe]) : Buffer.from([0xfe, 0xff]), le ? body : Buffer.from(body).swap16()]); return { xml: base, raw: rng.chance(0.2) ? raw.subarray(0, raw.length - 1) : rng.chance(0.2) ? raw.subarray(2) : raw, mutation: 'UTF-16' }; }],
    ['latin1', () => ({ xml: base, raw: Buffer.from(base.replace('encoding="utf-8"', `encoding="${rng.pick(['ISO-8859-1', 'windows-1252', 'x-bogus', 'utf-16', 'UTF-8'])}"`).replace('Sydney', 'Sÿdney'), 'latin1'), mutation: 'a declared encoding' })],
    ['invalid utf8', () => { const raw = Buffer.from(base); const bad = Buffer.concat([raw.subarray(0, at), Buffer.from(rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0xaf]])), raw.subarray(at)]); return { xml: base, raw: bad, mutation: 'invalid UTF-8' }; }],
    ['nul', () => ({ xml: `${base.slice(0, at)}\u0000${base.slice(at)}`, mutation: 'a NUL character' })],
    ['controls', () => ({ xml: base.replace('GIN', rng.pick(['\u0001\u001f', '\uffff', '\u2028\u2029', '😀', '\ud800'])), mutation: 'a control or special character' })],
    ['not xml', () => ({ xml: rng.pick(['{"json": true}', '', '   ', 'plain text', '<a/><b/>', '<?xml version="1.0"?>']), mutation: 'not XML' })],
    ['two bodies', () => ({ xml: `<UniversalInterchange><Body>${eventDocument({ interchange: false }).replace(/^<\?xml[^>]*\?>/, '')}</Body><Body/></UniversalInterchange>`, mutation: 'an interchange with two Bodies' })],
    ['byte flips', () => { const raw = Buffer.from(base); for (let i = rng.int(1, 4); i > 0; i--) raw[rng.int(0, raw.length - 1)] ^= 1 << rng.int(0, 7); return { xml: base, raw, mutation: 'bytes flipped' }; }],
  ];
  const [, make] = rng.pick(kinds);
  return make();
}

/** The Message's text: base64 of gzip of the document, or a broken one. */
function messageContent(rng: Rng, doc: Doc): { content: string; mutation: string | null } {
  const bytes = doc.raw ?? Buffer.from(doc.xml, 'utf8');
  let gz = gzipSync(bytes);
  let mutation: string | null = null;
  if (rng.chance(0.15)) {
    switch (rng.int(0, 8)) {
      case 0: mutation = 'gzip truncated'; gz = gz.subarray(0, rng.int(0, gz.length - 1)); break;
      case 1: mutation = 'two gzip members'; gz = Buffer.concat([gz, gzipSync(Buffer.from(rng.pick(['', '<x/>', bytes.toString('latin1')]), 'latin1'))]); break;
      case 2: mutation = 'gzip CRC corrupt'; gz = Buffer.from(gz); gz[gz.length - 8] ^= 0xff; break;
      case 3: mutation = 'gzip length corrupt'; gz = Buffer.from(gz); gz[gz.length - 1] ^= 0x01; break;
      case 4: mutation = 'gzip bomb'; gz = gzipSync(Buffer.alloc(rng.pick([8 * 1024 * 1024 + 1, 20 * 1024 * 1024]), 0x20)); break;
      case 5: mutation = 'gzip of non-XML'; gz = gzipSync(rng.bytes(rng.int(0, 200))); break;
      case 6: mutation = 'raw deflate'; gz = deflateRawSync(bytes); break;
      case 7: mutation = 'trailing garbage after gzip'; gz = Buffer.concat([gz, rng.bytes(rng.int(1, 20))]); break;
      default: mutation = 'gzip bytes flipped'; gz = Buffer.from(gz); gz[rng.int(0, gz.length - 1)] ^= 1 << rng.int(0, 7); break;
    }
  }
  let content = gz.toString('base64');
  if (rng.chance(0.3)) content = content.replace(/.{76}/g, '$&\r\n');
  if (rng.chance(0.08)) {
    mutation = 'base64 broken';
    content = rng.pick([() => content.replace(/=+$/, ''), () => `${content}!`, () => `${content}A`, () => '', () => '  \r\n ', () => content.replace(/[+/]/g, '-')])();
  }
  return { content, mutation };
}

function usernameToken(rng: Rng, mutations: string[]): { xml: string; good: boolean } {
  const digest = rng.chance(0.6);
  let created = new Date().toISOString();
  let nonceBytes = randomBytes(16);
  let password = PASSWORD;
  let username = USER;
  let good = true;
  let nonceText: string | null = nonceBytes.toString('base64');
  let type = digest ? DIGEST : TEXT;
  let extra = '';
  if (rng.chance(0.4)) {
    good = false;
    const kind = rng.int(0, 12);
    switch (kind) {
      case 0: mutations.push('token: wrong password'); password = 'wrong'; break;
      case 1: mutations.push('token: nonce missing'); nonceText = null; good = !digest; break;
      case 2: mutations.push('token: nonce not canonical'); good = !digest; nonceText = rng.pick([nonceText.replace(/=+$/, ''), `${nonceText.slice(0, 4)}!${nonceText.slice(4)}`, '', 'A'.repeat(200)]); break;
      // Whitespace around it is not part of the text XML gives (values are trimmed): the same nonce.
      case 12: mutations.push('token: nonce padded with whitespace'); good = true; nonceText = ` ${nonceText}\n`; break;
      case 3: mutations.push('token: created far off'); created = new Date(Date.now() + rng.pick([-1, 1]) * rng.pick([6 * 60_000, 86_400_000, 1e13])).toISOString(); good = !digest; break;
      case 4: mutations.push('token: created ill-formed'); created = rng.pick(['', 'yesterday', '2026-13-45T99:99:99Z', '0', '-271821-04-20T00:00:00.000Z']); good = !digest; break;
      case 5: mutations.push('token: duplicate nonce'); extra = `<o:Nonce>${randomBytes(16).toString('base64')}</o:Nonce>`; good = true; break;
      case 6: mutations.push('token: password type unknown'); type = rng.pick(['', 'urn:x#PasswordDigestX', 'PasswordDigest', '#PasswordDigest']); good = type.endsWith('#PasswordDigest') === digest; break;
      case 7: mutations.push('token: wrong user'); username = 'someone'; break;
      case 8: mutations.push('token: duplicate password'); extra = `<o:Password Type="${TEXT}">${PASSWORD}</o:Password>`; good = true; break;
      case 9: mutations.push('token: nonce of 65 bytes'); good = !digest; nonceBytes = randomBytes(65); nonceText = nonceBytes.toString('base64'); break;
      case 10: mutations.push('token: password in CDATA with a comment'); good = true; break;
      default: mutations.push('token: username missing'); username = ''; break;
    }
  }
  const nonceValue = nonceText === null ? Buffer.alloc(0) : Buffer.from(nonceText, 'base64');
  const value = digest ? createHash('sha1').update(nonceValue).update(created).update(password).digest('base64') : password;
  const passwordXml = mutations.at(-1) === 'token: password in CDATA with a comment' ? `<![CDATA[${value.slice(0, 3)}]]><!-- c -->${value.slice(3)}` : value;
  const xml = `<o:UsernameToken u:Id="uuid-1"><o:Username>${username}</o:Username><o:Password Type="${type}">${passwordXml}</o:Password>`
    + (nonceText === null ? '' : `<o:Nonce EncodingType="b64">${nonceText}</o:Nonce>`) + extra + `<u:Created>${created}</u:Created></o:UsernameToken>`;
  return { xml, good };
}

function logisticsCase(rng: Rng): LogisticsCase {
  const mutations: string[] = [];
  const auth = rng.chance(0.35) ? 'wsUsernameToken' : 'none';
  const count = rng.pick([1, 1, 1, 2, 3, 5]);
  const docs: Doc[] = [];
  const messages: string[] = [];
  const bigAttribute = rng.chance(0.03);
  for (let i = 0; i < count; i++) {
    const doc = document(rng);
    if (doc.mutation) mutations.push(`Message ${i + 1}: ${doc.mutation}`);
    const { content, mutation } = messageContent(rng, doc);
    if (mutation) mutations.push(`Message ${i + 1}: ${mutation}`);
    docs.push(mutation ? { ...doc, mutation } : doc);
    let tracking = rng.chance(0.1) ? rng.pick(['', 'T&amp;&quot;&lt;&gt;', `T-${'x'.repeat(300)}`, 'T\u00e9\u4e2d']) : `TRK-${i + 1}`;
    if (bigAttribute && i === 0) {
      // An attribute as large as a request may carry: what the decoded record holds of it is bounded too.
      tracking = 'T'.repeat(rng.int(3_900_000, 4_300_000));
      mutations.push(`Message 1: a TrackingID of ${tracking.length} characters`);
    }
    const attrs = rng.chance(0.05) ? ` ${Array.from({ length: rng.int(1, 2000) }, (_, j) => `X${j}="${j}"`).join(' ')}` : '';
    messages.push(`<Message ApplicationCode="UDM" ClientID="ACMESYD" TrackingID="${tracking}" SchemaType="Xml" FileName="${rng.pick(['', 'a.xml', '../../etc/passwd', 'CON', 'x'.repeat(300)])}"${attrs}>${content}</Message>`);
  }
  let goodToken = true;
  let token = '';
  if (auth === 'wsUsernameToken' || rng.chance(0.2)) {
    if (rng.chance(0.1)) { mutations.push('token: none'); goodToken = false; } else { const t = usernameToken(rng, mutations); token = t.xml; goodToken = t.good; }
  }
  const security = `<o:Security s:mustUnderstand="1" xmlns:o="${WSSE}"><u:Timestamp u:Id="_0"><u:Created>${new Date().toISOString()}</u:Created></u:Timestamp>${token}</o:Security>`;
  let header = `<s:Header><h:SendStreamRequestTrackingID xmlns:h="${EHUB}">a3f5c0de</h:SendStreamRequestTrackingID>${security}</s:Header>`;
  let body = `<s:Body><SendStreamRequest xmlns="${EHUB}"><Payload>${messages.join('')}</Payload></SendStreamRequest></s:Body>`;
  let open = `<s:Envelope xmlns:s="${SOAP}" xmlns:u="${WSU}">`;
  let close = '</s:Envelope>';
  if (rng.chance(0.3)) {
    switch (rng.int(0, 13)) {
      case 0: mutations.push('envelope: no Header'); header = ''; if (auth !== 'none') goodToken = false; break;
      case 1: mutations.push('envelope: no Body'); body = ''; break;
      case 2: mutations.push('envelope: two Bodies'); body += body; break;
      case 3: mutations.push('envelope: a Fault for a Body'); body = `<s:Body><s:Fault><faultcode>s:Client</faultcode><faultstring>${PASSWORD}</faultstring></s:Fault></s:Body>`; break;
      case 4: mutations.push('envelope: SOAP 1.2'); open = open.replace(SOAP, 'http://www.w3.org/2003/05/soap-envelope'); break;
      case 5: mutations.push('envelope: prefixes swapped'); open = `<e:Envelope xmlns:e="${SOAP}" xmlns:s="urn:not-soap" xmlns:u="${WSU}">`; close = '</e:Envelope>'; break;
      case 6: mutations.push('envelope: default namespace'); open = `<Envelope xmlns="${SOAP}" xmlns:s="${SOAP}" xmlns:u="${WSU}">`; close = '</Envelope>'; break;
      case 7: mutations.push('envelope: Body rebinds s'); body = body.replace('<s:Body>', '<s:Body xmlns:s="urn:other">'); break;
      case 8: mutations.push('envelope: two SendStreamRequests'); body = body.replace('</s:Body>', `<SendStreamRequest xmlns="${EHUB}"><Payload/></SendStreamRequest></s:Body>`); break;
      case 9: mutations.push('envelope: a DOCTYPE'); open = `<!DOCTYPE s:Envelope [<!ENTITY x SYSTEM "file:///etc/passwd">]>${open}`; break;
      case 10: mutations.push('envelope: Payload empty'); body = `<s:Body><SendStreamRequest xmlns="${EHUB}"><Payload/></SendStreamRequest></s:Body>`; break;
      case 11: mutations.push('envelope: Payload twice'); body = body.replace('</Payload>', '</Payload><Payload/>'); break;
      case 12: mutations.push('envelope: a comment with markup, and a Password of another namespace in the Header'); header = header.replace('<s:Header>', `<s:Header><!-- <Password> --><x:Password xmlns:x="urn:y">${PASSWORD}</x:Password>`); break;
      default: mutations.push('envelope: Messages past the limit'); body = body.replace('</Payload>', `${'<Message TrackingID="m">H4sIAAAAAAAAA7OJz8tMTrUDAL7ERoIHAAAA</Message>'.repeat(1001)}</Payload>`); break;
    }
  }
  let text = `${rng.chance(0.1) ? '<?xml version="1.0" encoding="utf-8"?>' : ''}${open}${header}${body}${close}`;
  let envelope = Buffer.from(text, 'utf8');
  if (rng.chance(0.15)) {
    const at = rng.int(0, envelope.length);
    switch (rng.int(0, 7)) {
      case 0: mutations.push(`envelope truncated at ${at}`); envelope = envelope.subarray(0, at); break;
      case 1: mutations.push('envelope bytes flipped'); envelope = Buffer.from(envelope); for (let i = rng.int(1, 3); i > 0; i--) envelope[rng.int(0, envelope.length - 1)] ^= 1 << rng.int(0, 7); break;
      case 2: mutations.push('envelope with a UTF-8 BOM'); envelope = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), envelope]); break;
      case 3: mutations.push('envelope in UTF-16'); envelope = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]); break;
      case 4: mutations.push('envelope with invalid UTF-8'); envelope = Buffer.concat([envelope.subarray(0, at), Buffer.from([0xc3, 0x28]), envelope.subarray(at)]); break;
      case 5: mutations.push('envelope with a NUL'); envelope = Buffer.concat([envelope.subarray(0, at), Buffer.from([0]), envelope.subarray(at)]); break;
      case 6: mutations.push('envelope deeply nested'); text = text.replace('<s:Header>', `<s:Header>${'<d>'.repeat(600)}${'</d>'.repeat(600)}`); envelope = Buffer.from(text); break;
      default: mutations.push('random bytes in the envelope'); envelope = Buffer.concat([envelope.subarray(0, at), rng.bytes(rng.int(1, 12)), envelope.subarray(at)]); break;
    }
  }
  const soapAction = rng.chance(0.85) ? SEND_STREAM_ACTION : rng.pick([undefined, '', '""', PING_ACTION, '"urn:other"']);
  if (soapAction === PING_ACTION || soapAction === '"urn:other"') mutations.push(`SOAPAction ${soapAction}`);
  const actions = rng.pick([['event-update', 'shipment-update'], ['event-update'], ['shipment-update']]);
  return { envelope, soapAction, auth, rawBody: rng.chance(0.3), actions, docs, mutations, goodToken, replay: rng.chance(0.05) };
}

const faultParser = new XMLParser({ ignoreAttributes: false, removeNSPrefix: true });
const FAULT_STATUSES = new Set([401, 403, 413, 415, 500, 503]);

/** The problems with a logistics refusal: a SOAP 1.1 Fault of ours, with a status the docs give. */
function faultProblems(answer: Answer): string[] {
  const problems: string[] = [];
  const body = String(answer.body ?? '');
  if (!FAULT_STATUSES.has(answer.status)) problems.push(`refused with status ${answer.status}`);
  if (XMLValidator.validate(body) !== true) problems.push(`a Fault that is not well-formed XML: ${body.slice(0, 300)}`);
  else {
    const fault = (faultParser.parse(body) as { Envelope?: { Body?: { Fault?: { faultcode?: string; faultstring?: { '#text'?: string } | string } } } }).Envelope?.Body?.Fault;
    if (!fault) problems.push(`a refusal that is no SOAP Fault: ${body.slice(0, 300)}`);
    else {
      if (!['s:Client', 's:Server', 's:VersionMismatch'].includes(String(fault.faultcode))) problems.push(`faultcode ${fault.faultcode}`);
      const text = typeof fault.faultstring === 'string' ? fault.faultstring : fault.faultstring?.['#text'];
      if (!text) problems.push('a Fault without a faultstring');
      if (answer.status >= 500 && answer.status !== 500 && fault.faultcode !== 's:Server') problems.push(`status ${answer.status} with ${fault.faultcode}`);
    }
  }
  if (body.includes(PASSWORD) || body.includes(PASSWORD.slice(0, 8))) problems.push('the Fault echoes the password');
  if (answer.headers?.['content-type'] !== 'text/xml; charset=utf-8') problems.push(`content-type ${answer.headers?.['content-type']}`);
  return problems;
}

const logisticsNode = (c: LogisticsCase): WorkflowNode => ({
  name: 'Freight', type: 'logisticsTrigger',
  parameters: { actions: c.actions, authentication: c.auth === 'none' ? undefined : c.auth, options: { rawBody: c.rawBody } },
  credentials: c.auth === 'none' ? undefined : { wsUsernameToken: CREDENTIAL.id },
} as WorkflowNode);

const services: TriggerServices = {
  credential: async (id) => (id === CREDENTIAL.id ? CREDENTIAL : null),
  store: null as never,
  logger: quiet,
};

async function checkLogistics(n: number): Promise<string[]> {
  const rng = prng(caseSeed(SEED, n));
  const c = logisticsCase(rng);
  const node = logisticsNode(c);
  const plugin = createLogisticsTrigger();
  const problems: string[] = [];
  const headers: Record<string, string> = { 'content-type': 'text/xml; charset=utf-8' };
  if (c.soapAction !== undefined) headers.soapaction = c.soapAction;
  const serviced = { ...services, store };
  let verdict: Verdict;
  try {
    verdict = await settles('the receiver', receive(plugin, requestOf(n, headers), node, chunked(rng, c.envelope), serviced));
  } catch (error) {
    problems.push(`the receiver threw or hung: ${(error as Error).stack}`);
    return withCase(n, problems, c.mutations, c.envelope);
  }
  // The same bytes in other chunks, to a fresh trigger (its nonce ledger empty): the same answer (not for the
  // megabyte requests, whose time goes to parsing, not to chunks).
  if (c.envelope.length < 1024 * 1024) try {
    const again = await settles('the receiver, chunked otherwise', receive(createLogisticsTrigger(), requestOf(n, headers, '-b'), node, chunked(rng, c.envelope), serviced));
    const summary = (v: Verdict) => `${v.accepted} ${v.answer.status} ${String(v.answer.body).replace(/<u:(Created|Expires)>[^<]*/g, '')}`;
    if (summary(again) !== summary(verdict)) problems.push(`the answer depends on the chunking: ${summary(verdict).slice(0, 300)} | ${summary(again).slice(0, 300)}`);
  } catch (error) {
    problems.push(`the receiver threw or hung on another chunking: ${(error as Error).message}`);
  }
  const isPing = c.soapAction === PING_ACTION;
  if (!verdict.accepted) {
    if (verdict.answer.status === 200) {
      if (!isPing) problems.push(`a 200 without an accept: ${String(verdict.answer.body).slice(0, 200)}`);
    } else {
      problems.push(...faultProblems(verdict.answer));
    }
    // No silent refusal of what was sent as it should be.
    if (c.mutations.length === 0 && c.goodToken && !isPing && c.soapAction !== '"urn:other"') problems.push(`an unmutated request refused: ${verdict.answer.status} ${String(verdict.answer.body).slice(0, 400)}`);
    return withCase(n, problems, c.mutations, c.envelope);
  }
  if (isPing) problems.push('a Ping accepted');
  if (verdict.answer.status !== 200) problems.push(`accepted, answered ${verdict.answer.status}`);
  if (c.auth === 'wsUsernameToken' && !c.goodToken) problems.push('accepted with a bad token');
  if (verdict.kept.toString('latin1').includes(PASSWORD) || verdict.kept.toString('utf8').includes(PASSWORD.slice(0, 8))) problems.push('the kept copy holds the password');
  // Accepted ⇒ decodes, within one record.
  try {
    const { items, recordBytes } = await settles('the decoder', decodeKept(plugin, requestOf(n, headers), node, verdict.kept, 'logistics'));
    if (recordBytes > MAX_RECORD_BYTES) problems.push(`accepted, but the Decoded record is ${recordBytes} bytes (dead-lettered as output-too-large)`);
    if (items.length > c.docs.length) problems.push(`${items.length} items of ${c.docs.length} Messages`);
    for (const item of items) {
      const value = JSON.parse(item.value) as { event: string; data?: unknown; file?: string };
      if (!c.actions.includes(value.event)) problems.push(`an item for event ${value.event}, not selected`);
      if (c.rawBody !== (value.file !== undefined)) problems.push('rawBody not followed');
    }
    // Unmutated documents: every selected one gives its item, with the data the document holds.
    c.docs.forEach((doc, i) => {
      if (doc.mutation !== null) return;
      const expected = unwrapUniversal(doc.xml, true, { units: 1e7 });
      const item = items.find((it) => it.sourceIndex === i);
      const selected = expected.kind === 'event' && c.actions.includes(expected.event);
      if (selected !== (item !== undefined)) problems.push(`Message ${i + 1}: ${selected ? 'dropped' : 'ran though not selected'}`);
      if (item && expected.kind === 'event' && !c.rawBody && JSON.stringify((JSON.parse(item.value) as { data: unknown }).data) !== JSON.stringify(expected.data)) problems.push(`Message ${i + 1}: data differs`);
    });
  } catch (error) {
    problems.push(`accepted, but the decoder failed: ${error instanceof IngressError ? `${error.code}: ${error.message}` : (error as Error).stack}`);
  }
  if (c.replay) {
    const replayed = await settles('a replay', receive(plugin, requestOf(n, headers, '-replay'), node, [c.envelope], serviced));
    const digest = c.envelope.includes('#PasswordDigest');
    if (c.auth === 'wsUsernameToken' && digest && (replayed.accepted || replayed.answer.status !== 403)) problems.push(`a replayed digest token answered ${replayed.answer.status}`);
  }
  return withCase(n, problems, c.mutations, c.envelope);
}

function withCase(n: number, problems: string[], mutations: string[], body: Buffer): string[] {
  if (problems.length) problems.unshift(`case ${n} (FUZZ_SEED=${SEED} FUZZ_CASE=${n}), mutations [${mutations.join('; ')}], body ${JSON.stringify(body.toString('latin1').slice(0, 1500))}${body.length > 1500 ? ` … (${body.length} bytes)` : ''}`);
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// Warehouse posts.

interface WarehouseCase { body: Buffer; mutations: string[]; actions: string[] }

function warehouseCase(rng: Rng): WarehouseCase {
  const mutations: string[] = [];
  const post: Record<string, unknown> = rng.chance(0.5) ? dcPost(`p-${rng.int(0, 50)}`) : rcPost(`p-${rng.int(0, 50)}`);
  if (rng.chance(0.3)) {
    const id = rng.pick<unknown>([0, -0, 1.5, 1e400, 9007199254740993, '', ' ', null, true, [], {}, '倉庫', 'constructor']);
    mutations.push(`PostId ${JSON.stringify(id)}`);
    post.PostId = id;
  }
  if (rng.chance(0.3)) {
    const type = rng.pick<unknown>([' dc ', 'Dc', 'rC', 'ASN', '', null, 7, 'constructor', '__proto__', 'toString', 'DC\u0000', 'ＤＣ']);
    mutations.push(`Type ${JSON.stringify(type)}`);
    post.Type = type;
  }
  let text = JSON.stringify(post, null, rng.chance(0.3) ? 2 : undefined);
  if (rng.chance(0.5)) {
    const at = rng.int(0, text.length);
    const kinds: Array<() => void> = [
      () => { mutations.push(`truncated at ${at}`); text = text.slice(0, at); },
      () => { mutations.push('a top-level duplicate'); text = text.replace('{', rng.pick(['{"duplicate":true,', '{"\\u0064uplicate":1,', '{"Data":{"duplicate":1},'])); },
      () => { const d = rng.pick([100, 511, 512, 513, 5000]); mutations.push(`nested ${d} deep`); text = text.replace('"Data":', `"Deep":${'['.repeat(d)}${']'.repeat(d)},"Data":`); },
      () => { mutations.push('brackets in strings'); text = text.replace('"Data":', `"S":"${'[{'.repeat(600)}\\"\\\\",  "Data":`); },
      () => { mutations.push('a repeated member'); text = text.replace('{', '{"Type":"RC","PostId":18446744073709551617,'); },
      () => { mutations.push('a big numeric PostId'); text = text.replace(/"PostId":[^,]*,/, `"PostId":${rng.pick(['18446744073709551617', '1e400', '-0', '0.0', '1E2', '123456789012345678901234567890'])},`); },
      () => { mutations.push('not an object'); text = rng.pick(['[1]', '"x"', 'null', '', ' ', '1', 'true', '{', '}{']); },
      () => { mutations.push('trailing text'); text += rng.pick(['x', ' {}', '\u0000', ',']); },
      () => { mutations.push('a lone surrogate escape'); text = text.replace('"Data":', '"Z":"\\ud800","Data":'); },
      () => { mutations.push('whitespace around'); text = `${rng.pick([' ', '\r\n', '\t'])}${text}${rng.pick([' ', '\n'])}`; },
      () => { mutations.push('a comment'); text = text.replace('{', '{/* c */'); },
    ];
    rng.pick(kinds)();
  }
  let body = Buffer.from(text, 'utf8');
  if (rng.chance(0.2)) {
    const at = rng.int(0, body.length);
    switch (rng.int(0, 5)) {
      case 0: mutations.push('a UTF-8 BOM'); body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]); break;
      case 1: mutations.push('UTF-16'); body = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]); break;
      case 2: mutations.push('invalid UTF-8'); body = Buffer.concat([body.subarray(0, at), Buffer.from(rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80]])), body.subarray(at)]); break;
      case 3: mutations.push('a NUL byte'); body = Buffer.concat([body.subarray(0, at), Buffer.from([0]), body.subarray(at)]); break;
      case 4: mutations.push('two BOMs'); body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf]), body]); break;
      default: mutations.push('bytes flipped'); body = Buffer.from(body); for (let i = rng.int(1, 3); i > 0; i--) body[rng.int(0, body.length - 1)] ^= 1 << rng.int(0, 7); break;
    }
  }
  return { body, mutations, actions: rng.pick([['dc', 'rc'], ['dc'], ['rc']]) };
}

const WAREHOUSE_STATUSES = new Set([400, 413, 415, 503]);

async function checkWarehouse(n: number): Promise<string[]> {
  const rng = prng(caseSeed(SEED ^ 0x5a5a5a5a, n));
  const c = warehouseCase(rng);
  const plugin = createWarehouseTrigger();
  const node = { name: 'Warehouse', type: 'warehouseTrigger', parameters: { actions: c.actions } } as unknown as WorkflowNode;
  const headers = { 'content-type': 'application/json' };
  const problems: string[] = [];
  let verdict: Verdict;
  try {
    verdict = await settles('the receiver', receive(plugin, requestOf(n, headers, '-w'), node, chunked(rng, c.body), { ...services, store }));
  } catch (error) {
    problems.push(`the receiver threw or hung: ${(error as Error).stack}`);
    return withCase(n, problems, c.mutations, c.body);
  }
  const bodyText = c.body.toString('utf8').replace(/^\ufeff/, '');
  let parsed: unknown;
  try { parsed = JSON.parse(bodyText); } catch { parsed = undefined; }
  if (!verdict.accepted) {
    const answer = verdict.answer;
    if (!WAREHOUSE_STATUSES.has(answer.status)) problems.push(`refused with status ${answer.status}`);
    let error: { error?: string; message?: string } | null = null;
    try { error = JSON.parse(String(answer.body)) as { error?: string; message?: string }; } catch { problems.push(`a refusal that is not JSON: ${String(answer.body)}`); }
    if (error && (!error.error || !error.message)) problems.push(`a refusal without code and message: ${String(answer.body)}`);
    if (c.mutations.length === 0) problems.push(`an unmutated post refused: ${String(answer.body)}`);
    return withCase(n, problems, c.mutations, c.body);
  }
  if (verdict.answer.status !== 200) problems.push(`accepted, answered ${verdict.answer.status}`);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) problems.push('accepted a post that is not a JSON object');
  try {
    const { items, recordBytes } = await settles('the decoder', decodeKept(plugin, requestOf(n, headers, '-w'), node, verdict.kept, 'warehouse'));
    if (recordBytes > MAX_RECORD_BYTES) problems.push(`the Decoded record is ${recordBytes} bytes`);
    const type = (parsed as { Type?: unknown }).Type;
    const action = typeof type === 'string' ? ({ DC: 'dc', RC: 'rc' } as Record<string, string>)[type.trim().toUpperCase()] : undefined;
    const selected = action !== undefined && Object.hasOwn({ DC: 1, RC: 1 }, type!.toString().trim().toUpperCase()) && c.actions.includes(action);
    if (items.length !== (selected ? 1 : 0)) problems.push(`${items.length} items for Type ${JSON.stringify(type)} and actions ${c.actions}`);
    for (const item of items) {
      const value = JSON.parse(item.value) as Record<string, unknown>;
      if (Object.keys(value)[0] !== 'duplicate' || typeof value.duplicate !== 'boolean') problems.push(`output without duplicate first: ${item.value.slice(0, 200)}`);
      const { duplicate: _, ...rest } = value;
      if (JSON.stringify(rest) !== JSON.stringify(parsed)) problems.push(`output differs from the post: ${item.value.slice(0, 300)}`);
    }
  } catch (error) {
    problems.push(`accepted, but the decoder failed: ${(error as Error).stack}`);
  }
  return withCase(n, problems, c.mutations, c.body);
}

// ---------------------------------------------------------------------------------------------------------------

async function runCases(name: string, check: (n: number) => Promise<string[]>, cases: number) {
  const failures: string[][] = [];
  for (let n = ONLY_CASE ?? 0; n < (ONLY_CASE === null ? cases : ONLY_CASE + 1); n++) {
    running = `${name} case ${n} (FUZZ_SEED=${SEED} FUZZ_CASE=${n})`;
    const problems = await check(n);
    running = null;
    if (problems.length) failures.push(problems);
    if (failures.length >= 5) break;
  }
  expect(failures.map((f) => f.join('\n  '))).toEqual([]);
}

test(`logistics: ${CASES} seeded SOAP requests — refusals are precise Faults, an accepted request decodes within one record`, async () => {
  await runCases('logistics', checkLogistics, CASES);
}, 600_000);

test(`warehouse: ${WAREHOUSE_CASES} seeded posts — refusals are precise, an accepted post decodes to itself plus duplicate`, async () => {
  await runCases('warehouse', checkWarehouse, WAREHOUSE_CASES);
}, 600_000);

