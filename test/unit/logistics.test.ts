import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { readSendStream, SendStreamError } from '../../services/triggers/logistics/send-stream';
import { unwrapUniversal } from '../../services/triggers/logistics/universal';
import { checkUsernameToken, nonceBytes } from '../../services/triggers/logistics/username-token';
import { withoutPasswords } from '../../services/triggers/logistics/password-redaction';
import { XMLValidator } from 'fast-xml-parser';
import { readEnvelope, usernameTokenOf } from '../../services/triggers/logistics/send-stream';
import { DEPTH_LEVELS_PER_UNIT, DISTINCT_NAME_UNITS, FREE_DISTINCT_NAMES, MAX_ATTRIBUTES, MAX_DEPTH, parseXml, TEXT_CHARS_PER_UNIT, XmlError } from '../../services/triggers/logistics/xml';
import { requestBudget } from '../../services/triggers/logistics/send-stream';
import { createLogisticsTrigger, DEFAULT_LOGISTICS_LIMITS } from '../../services/triggers/logistics/logistics-trigger';
import type { Received } from '../../services/platform/avro/records';
import { MAX_RECORD_BYTES } from '../../services/platform/log/event-log';
import type { WorkflowNode } from '../../services/platform/registry/documents';
import type { InboundRequest, TriggerServices } from '../../services/triggers/trigger';
import { encodeMessage, eventDocument, SEND_STREAM_ACTION, sendStreamRequest, shipmentDocument, transactionDocument, type TokenSpec } from '../fixtures/cargowise';

/** The logistics trigger's pure parts: envelope reading, unwrapping rules, UsernameToken. */
const LIMITS = { maxInflatedBytes: 1024 * 1024, maxMessages: 10, maxParseUnits: 1_000_000 };
const budget = () => ({ units: 1_000_000 });

function faultOf(body: string): SendStreamError {
  try {
    const stream = readSendStream(body, LIMITS, true);
    for (const m of stream.messages) unwrapUniversal(m.xml, true, budget());
  } catch (error) {
    if (error instanceof SendStreamError) return error;
    if (error instanceof XmlError) return new SendStreamError(error.message);
    throw error;
  }
  throw new Error('no fault');
}

describe('unwrapping Universal documents (SPEC §2.3)', () => {
  test('an event: strings kept, one-item collection is an object, many-item an array', () => {
    const one = unwrapUniversal(eventDocument({ contexts: 1 }), true, budget());
    expect(one).toMatchObject({ kind: 'event', event: 'event-update' });
    const data = (one as { data: Record<string, any> }).data;
    expect(data.EventType).toBe('GIN');
    expect(data.IsEstimate).toBe('false');
    expect(data.DataContext.DataTargetCollection.DataTarget.Type).toBe('ContainerStock');
    expect(data.DataContext.Company).toEqual({ Code: 'SYD', Country: { Code: 'AU', Name: 'Australia' }, Name: 'Acme Logistics Pty Ltd' });
    expect(data.DataContext.TriggerCount).toBe('1');
    expect(data.ContextCollection.Context).toEqual({ Type: 'ContainerNumber', Value: 'MSCU1234567' });
    const many = unwrapUniversal(eventDocument({ contexts: 3 }), true, budget()) as { data: Record<string, any> };
    expect(many.data.ContextCollection.Context).toHaveLength(3);
    expect(many.data.ContextCollection.Context[2]).toEqual({ Type: 'Ref2', Value: 'V2' });
  });

  test('a shipment: numeric strings stay strings, empty elements are "", attributes are @name, entities decoded', () => {
    const single = unwrapUniversal(shipmentDocument(), true, budget()) as { event: string; data: Record<string, any> };
    expect(single.event).toBe('shipment-update');
    const s = single.data;
    expect(s.TotalWeight).toBe('18250.500');
    expect(s.ContainerCount).toBe('1');
    expect(s.PortOfLoading).toEqual({ Code: 'AUSYD', Name: 'Sydney' });
    expect(s.ContainerCollection['@Content']).toBe('Complete');
    expect(Array.isArray(s.ContainerCollection.Container)).toBe(false);
    expect(s.MilestoneCollection.Milestone.ActualDate).toBe('');
    expect(s.SubShipmentCollection.SubShipment.ShippingInstructions).toBe('');
    expect(s.SubShipmentCollection.SubShipment.PackingLineCollection.PackingLine.GoodsDescription).toBe('Line 0 & parts');
    expect(s.DataContext.DataSourceCollection.DataSource).toEqual({ Type: 'ForwardingShipment', Key: 'S00001' });

    const many = (unwrapUniversal(shipmentDocument({ many: true }), true, budget()) as { data: Record<string, any> }).data;
    for (const [collection, item] of [['ContainerCollection', 'Container'], ['DateCollection', 'Date'], ['MilestoneCollection', 'Milestone'], ['OrganizationAddressCollection', 'OrganizationAddress'], ['TransportLegCollection', 'TransportLeg'], ['SubShipmentCollection', 'SubShipment']]) {
      expect(many[collection][item]).toHaveLength(3);
    }
    expect(many.DateCollection.Date[1]).toEqual({ Type: 'Arrival', IsEstimate: 'true', Value: '2026-12-02T00:00:00' });
  });

  test('a consol with several sub-shipments and data sources', () => {
    const consol = (unwrapUniversal(shipmentDocument({ consol: true }), true, budget()) as { data: Record<string, any> }).data;
    expect(consol.DataContext.DataSourceCollection.DataSource[0]).toEqual({ Type: 'ForwardingConsol', Key: 'C00012345' });
    expect(consol.SubShipmentCollection.SubShipment).toHaveLength(3);
  });

  test('local names match whatever the namespace year; a document without the interchange is read too', () => {
    expect(unwrapUniversal(eventDocument({ ns: 'http://www.cargowise.com/Schemas/Universal/2030/01' }), true, budget())).toMatchObject({ kind: 'event', event: 'event-update' });
    expect(unwrapUniversal(eventDocument({ interchange: false }), true, budget())).toMatchObject({ kind: 'event', event: 'event-update' });
  });

  test('other documents are recognised as such', () => {
    expect(unwrapUniversal(transactionDocument(), true, budget())).toEqual({ kind: 'other', documentType: 'UniversalTransaction' });
    for (const name of ['toString', 'hasOwnProperty', 'valueOf']) {
      expect(unwrapUniversal(`<${name}><undefined>x</undefined></${name}>`, true, budget())).toEqual({ kind: 'other', documentType: name });
    }
    expect(unwrapUniversal('<Native><Body/></Native>', true, budget())).toEqual({ kind: 'other', documentType: 'Native' });
  });

  test('an interchange whose Body holds several documents starts nothing (the first ran and the rest were dropped)', () => {
    const event = '<UniversalEvent><Event><EventType>ARV</EventType></Event></UniversalEvent>';
    const shipment = '<UniversalShipment><Shipment><ContainerCount>2</ContainerCount></Shipment></UniversalShipment>';
    const several = { kind: 'other', documentType: 'UniversalInterchange with several Body documents' };
    for (const body of [event + shipment, shipment + event, event + event, `${event}<Note/>`]) {
      expect(unwrapUniversal(`<UniversalInterchange><Body>${body}</Body></UniversalInterchange>`, true, budget())).toEqual(several);
    }
    expect(unwrapUniversal(`<UniversalInterchange version="1"><Body a="1">${event}</Body></UniversalInterchange>`, true, budget())).toMatchObject({ kind: 'event', event: 'event-update' });
  });
});

describe('reading a SendStreamRequest', () => {
  test('messages, their attributes and the header tracking id', () => {
    const stream = readSendStream(sendStreamRequest([{ xml: eventDocument(), trackingId: 'A' }, { xml: shipmentDocument(), trackingId: 'B', fileName: 'ship.xml' }]), LIMITS, true);
    expect(stream.requestTrackingId).toBe('a3f5c0de-0000-4000-8000-000000000001');
    expect(stream.messages.map((m) => m.trackingId)).toEqual(['A', 'B']);
    expect(stream.messages[1].attributes).toMatchObject({ ApplicationCode: 'UDM', ClientID: 'ACMESYD', FileName: 'ship.xml', SchemaType: 'Xml' });
    expect(stream.messages[0].xml).toBe(eventDocument());
  });

  test.each([
    ['a truncated envelope', () => sendStreamRequest([{ xml: eventDocument() }]).slice(0, 300), /not well-formed/],
    ['another envelope namespace (SOAP 1.2)', () => sendStreamRequest([{}], { envelopeNs: 'http://www.w3.org/2003/05/soap-envelope' }), /not SOAP 1\.1/],
    ['another request namespace', () => sendStreamRequest([{}], { requestNs: 'http://example.com/other' }), /no SendStreamRequest/],
    ['no Message', () => sendStreamRequest([]), /no Message/],
    ['not base64', () => sendStreamRequest([{ base64: 'H4sI$$$$', trackingId: 'T-BAD64' }]), /not valid base64/],
    ['base64 of something that is not gzip', () => sendStreamRequest([{ raw: Buffer.from('<xml/>'), trackingId: 'T-PLAIN' }]), /not gzip/],
    ['corrupt gzip', () => { const g = gzipSync(eventDocument()); g[g.length - 6] ^= 0xff; g[20] ^= 0xff; return sendStreamRequest([{ raw: g, trackingId: 'T-CORRUPT' }]); }, /not valid gzip/],
    ['a gzip bomb', () => sendStreamRequest([{ raw: gzipSync(Buffer.alloc(8 * 1024 * 1024, 0x20)), trackingId: 'T-BOMB' }]), /inflates beyond/],
    ['a document that is not XML', () => sendStreamRequest([{ xml: '{"json": true}', trackingId: 'T-JSON' }]), /./],
    ['a truncated document', () => sendStreamRequest([{ xml: eventDocument().slice(0, 200), trackingId: 'T-TRUNC' }]), /./],
    ['an entity bomb in the envelope', () => `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>${sendStreamRequest([{}])}`, /document type declaration/],
    ['an entity bomb in a document', () => sendStreamRequest([{ xml: `<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xxxxxxxx"><!ENTITY y "&x;&x;&x;&x;&x;&x;">]><UniversalInterchange><Body>&y;</Body></UniversalInterchange>`, trackingId: 'T-ENT' }]), /document type declaration/],
    ['an external entity', () => sendStreamRequest([{ xml: `<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><UniversalInterchange>&x;</UniversalInterchange>`, trackingId: 'T-XXE' }]), /document type declaration/],
  ])('%s is a fault', (_name, body, message) => {
    const fault = faultOf(body());
    expect(fault.message).toMatch(message);
  });

  test('a fault in a Message names its TrackingID', () => {
    expect(faultOf(sendStreamRequest([{ xml: eventDocument(), trackingId: 'OK-1' }, { base64: '@@@@', trackingId: 'T-SECOND' }])).trackingId).toBe('T-SECOND');
    expect(faultOf(sendStreamRequest([{ raw: gzipSync(Buffer.alloc(8 * 1024 * 1024)), trackingId: 'T-BOMB' }])).trackingId).toBe('T-BOMB');
  });

  test('the inflation bound is for all Messages of a request together', () => {
    const half = shipmentDocument({ padTo: 400 * 1024 });
    expect(readSendStream(sendStreamRequest([{ xml: half }, { xml: half }]), LIMITS, true).messages).toHaveLength(2);
    expect(() => readSendStream(sendStreamRequest([{ xml: half }, { xml: half }, { xml: half }]), LIMITS, true)).toThrow(/inflates beyond/);
  });

  // zlib takes no limit below one byte: once the budget was spent, each further Message could inflate one byte.
  test('a spent inflation budget refuses the next Message, however small', () => {
    const exact = { maxInflatedBytes: Buffer.byteLength(eventDocument()), maxMessages: 10, maxParseUnits: 1_000_000 };
    expect(readSendStream(sendStreamRequest([{ xml: eventDocument() }]), exact, true).messages).toHaveLength(1);
    const oneByteMore = sendStreamRequest([{ xml: eventDocument() }, { raw: gzipSync('x'), trackingId: 'T-ONE-BYTE' }]);
    expect(() => readSendStream(oneByteMore, exact, true)).toThrow(SendStreamError);
    expect(() => readSendStream(oneByteMore, exact, true)).toThrow('Message 2 inflates beyond the limit of this service');
  });

  test('a Message attribute whose name only starts with xmlns (xmlnsFoo, xmlns-x) is kept; xmlns and xmlns:* are declarations', () => {
    const request = sendStreamRequest([{ trackingId: 'X-1' }]).replace('<Message ', '<Message xmlnsFoo="kept" xmlns-x="kept too" xmlns:m="urn:m" m:Extra="e" ');
    const [message] = readSendStream(request, LIMITS, true).messages;
    expect(message.attributes).toMatchObject({ xmlnsFoo: 'kept', 'xmlns-x': 'kept too', Extra: 'e', TrackingID: 'X-1' });
    expect(Object.keys(message.attributes).filter((k) => k === 'xmlns' || k.startsWith('xmlns:') || k === 'm')).toEqual([]);
  });

  test('namespace prefixes resolve through the ancestors, the nearest declaration winning', () => {
    const S = 'http://schemas.xmlsoap.org/soap/envelope/';
    // The envelope binds `x` to another namespace (among many decoys); a Body that binds `x` to SOAP's
    // itself is found, one that relies on the envelope's binding is not.
    const decoys = Array.from({ length: 50 }, (_, i) => ` xmlns:d${i}="urn:decoy"`).join('');
    const request = sendStreamRequest([{ xml: eventDocument(), trackingId: 'NS-1' }]).replace(/<(\w+):Envelope /, `<$1:Envelope xmlns:x="urn:wrong"${decoys} `);
    const body = (open: string) => request.replace(/<\w+:Body>/, open).replace(/<\/\w+:Body>/, '</x:Body>');
    expect(readSendStream(body(`<x:Body xmlns:x="${S}">`), LIMITS, true).messages.map((m) => m.trackingId)).toEqual(['NS-1']);
    expect(() => readSendStream(body('<x:Body>'), LIMITS, true)).toThrow(/no Body/);
  });

  test('more Messages than allowed is a fault', () => {
    expect(() => readSendStream(sendStreamRequest(Array.from({ length: 11 }, () => ({}))), LIMITS, true)).toThrow(/more than 10 Messages/);
  });

  test('deep nesting is a fault, not a crash', () => {
    const deep = `${'<a>'.repeat(200_000)}${'</a>'.repeat(200_000)}`;
    expect(() => unwrapUniversal(deep, true, budget())).toThrow(XmlError);
    expect(faultOf(sendStreamRequest([{ xml: deep, trackingId: 'T-DEEP' }])).trackingId).toBe('T-DEEP');
  });

  test('random bytes never crash the reader', () => {
    const good = sendStreamRequest([{ xml: eventDocument() }]);
    let seed = 7;
    const random = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed; };
    for (let i = 0; i < 300; i++) {
      const cut = random() % good.length;
      const mutated = good.slice(0, cut) + String.fromCharCode(random() % 128) + good.slice(cut + 1 + (random() % 5));
      try {
        const stream = readSendStream(mutated, LIMITS, true);
        for (const m of stream.messages) unwrapUniversal(m.xml, true, budget());
      } catch (error) {
        expect(error instanceof SendStreamError || error instanceof XmlError).toBe(true);
      }
    }
  });
});

describe('WS-Security UsernameToken', () => {
  const expected = { user: 'eadaptor', password: 's3cret' };
  const tokenIn = (token: TokenSpec | undefined) => usernameTokenOf(readEnvelope(sendStreamRequest([{}], { token }), true, budget()));

  test('PasswordText and PasswordDigest are checked', () => {
    const now = Date.now();
    expect(checkUsernameToken(tokenIn({ username: 'eadaptor', password: 's3cret' }), expected, now, 300_000)).toEqual({ ok: true });
    expect(checkUsernameToken(tokenIn({ username: 'eadaptor', password: 's3cret', digest: true }), expected, now, 300_000)).toEqual({ ok: true });
    expect(checkUsernameToken(tokenIn({ username: 'eadaptor', password: 'wrong' }), expected, now, 300_000)).toEqual({ ok: false, code: 'authorization-wrong' });
    expect(checkUsernameToken(tokenIn({ username: 'other', password: 's3cret', digest: true }), expected, now, 300_000)).toEqual({ ok: false, code: 'authorization-wrong' });
    expect(checkUsernameToken(tokenIn(undefined), expected, now, 300_000)).toEqual({ ok: false, code: 'authorization-required' });
  });

  test('a nonce counts only as canonical base64 of at most 64 bytes', () => {
    const nonce = Buffer.from('0123456789abcdef').toString('base64');
    expect(nonceBytes(nonce)?.toString()).toBe('0123456789abcdef');
    for (const respelled of [nonce.replace(/=+$/, ''), `${nonce}!`, ` ${nonce}`, `${nonce.slice(0, 4)}\n${nonce.slice(4)}`, '', Buffer.alloc(65).toString('base64')]) {
      expect(nonceBytes(respelled)).toBeNull();
    }
  });

  test('a stale digest token is refused', () => {
    const stale = tokenIn({ username: 'eadaptor', password: 's3cret', digest: true, created: new Date(Date.now() - 3_600_000).toISOString() });
    expect(checkUsernameToken(stale, expected, Date.now(), 300_000)).toEqual({ ok: false, code: 'authorization-wrong' });
  });
});

test('the fixture helper breaks base64 into lines like the platform does', () => {
  expect(encodeMessage(shipmentDocument())).toMatch(/\r\n/);
});

describe('bounds of one request', () => {
  test('a small Message of millions of empty elements is a fault before it is parsed', () => {
    const bomb = `<UniversalInterchange><Body><UniversalEvent><Event>${'<a/>'.repeat(2_000_000)}</Event></UniversalEvent></Body></UniversalInterchange>`;
    const body = sendStreamRequest([{ xml: bomb, trackingId: 'T-ELEMENTS' }]);
    expect(body.length).toBeLessThan(100_000);
    const limits = { maxInflatedBytes: 16 * 1024 * 1024, maxMessages: 10, maxParseUnits: 500_000 };
    const shared = { inflatedBytes: limits.maxInflatedBytes, units: limits.maxParseUnits };
    const stream = readSendStream(body, limits, true, shared);
    expect(() => unwrapUniversal(stream.messages[0].xml, true, shared)).toThrow(/more markup than this service parses/);
  });

  // 34 KB on the wire, 5 MiB once inflated: a million character references, about as many units as elements
  // would be, and seconds of parsing (and validating) before anything looked at them.
  const references = (count: number, reference = '&#65;') => `<UniversalInterchange><Body><UniversalEvent><Event><Note>${reference.repeat(count)}</Note></Event></UniversalEvent></Body></UniversalInterchange>`;

  test('a small Message of a million character references is a fault before it is parsed', () => {
    const body = sendStreamRequest([{ xml: references(1_100_000), trackingId: 'T-REFS' }]);
    expect(body.length).toBeLessThan(60_000);
    const limits = { maxInflatedBytes: DEFAULT_LOGISTICS_LIMITS.maxInflatedBytes, maxMessages: 10, maxParseUnits: DEFAULT_LOGISTICS_LIMITS.maxParseUnits };
    const shared = requestBudget(limits);
    const stream = readSendStream(body, limits, true, shared);
    expect(() => unwrapUniversal(stream.messages[0].xml, true, shared)).toThrow(/more markup than this service parses/);
    // The same references as entity references, or inside attribute values, cost the same.
    expect(() => unwrapUniversal(references(600_000, '&amp;'), true, requestBudget(limits))).toThrow(/more markup than this service parses/);
    expect(() => unwrapUniversal(`<r a="${'&#65;'.repeat(600_000)}"/>`, true, requestBudget(limits))).toThrow(/more markup than this service parses/);
  });

  test('each reference spends a unit, and each 32 characters of the document another; references inside comments and CDATA are text', () => {
    const plain = references(0);
    const base = plain.length / TEXT_CHARS_PER_UNIT;
    const unitsOf = (xml: string) => { const b = { units: 1_000_000 }; parseXml(xml, 'local', true, b); return 1_000_000 - b.units; };
    expect(unitsOf(plain)).toBe(Math.ceil(base) + 5);
    expect(unitsOf(references(1000))).toBe(Math.ceil((plain.length + 5000) / TEXT_CHARS_PER_UNIT) + 5 + 1000);
    const mixed = `<r a="&amp;&lt;" b="&#x41;">&quot;<!-- &amp; --><![CDATA[&amp;&amp;]]></r>`;
    expect(unitsOf(mixed)).toBe(Math.ceil(mixed.length / TEXT_CHARS_PER_UNIT) + 1 + 2 + 3 + 1); // element, attributes, in them, in the text
    expect(unitsOf(`<r>${'x'.repeat(64 * 1000)}</r>`)).toBe(2000 + 1 + 1);
    expect(parseXml(`<r a="&amp;&lt;" b="&#x41;">&quot;<!-- &amp; --><![CDATA[&amp;]]></r>`, 'local', true, { units: 100 })).toEqual({ r: { '@a': '&<', '@b': 'A', '#text': '"&amp;' } });
  });

  test('text alone spends the budget: a document of 16 MiB of text is refused, not parsed for seconds', () => {
    const doc = `<UniversalInterchange><Body>${'x'.repeat(16 * 1024 * 1024)}</Body></UniversalInterchange>`;
    expect(() => unwrapUniversal(doc, true, { units: DEFAULT_LOGISTICS_LIMITS.maxParseUnits })).toThrow(/more markup than this service parses/);
  });

  test('the element budget is shared by every document of a request', () => {
    const doc = shipmentDocument({ many: true });
    const limits = { maxInflatedBytes: 16 * 1024 * 1024, maxMessages: 10, maxParseUnits: 1200 };
    const shared = { inflatedBytes: limits.maxInflatedBytes, units: limits.maxParseUnits };
    const stream = readSendStream(sendStreamRequest([{ xml: doc }, { xml: doc }, { xml: doc }]), limits, true, shared);
    // One document fits the budget on its own; the three of one request do not.
    expect(() => unwrapUniversal(doc, true, { units: 600 })).not.toThrow();
    expect(() => stream.messages.forEach((m) => unwrapUniversal(m.xml, true, shared))).toThrow(XmlError);
  });

  test('attributes spend the budget too', () => {
    const attributes = Array.from({ length: 250 }, (_, i) => ` a${i}="v"`).join('');
    const doc = `<UniversalInterchange><Body><UniversalEvent>${`<Event${attributes}/>`.repeat(4)}</UniversalEvent></Body></UniversalInterchange>`;
    expect(() => unwrapUniversal(doc, true, { units: 900 })).toThrow(/more markup than this service parses/);
    expect(() => unwrapUniversal(doc, true, { units: 2000 })).not.toThrow();
  });

  // 360 000 attributes on one element of the envelope's header fitted the budget (a unit each) and held the
  // receiver 3 s before the UsernameToken was checked: the parser's cost per attribute grows with their number.
  test(`more than ${MAX_ATTRIBUTES} attributes on one element are refused where the request arrives, before parsing; the decoder reads what was accepted before the bound`, () => {
    const element = (count: number, name = 'X') => `<${name}${Array.from({ length: count }, (_, i) => ` a${i}="${i % 2 ? 'x=y' : ''}"`).join('')}/>`;
    const doc = (count: number) => `<UniversalEvent><Event>${element(count)}</Event></UniversalEvent>`;
    expect(() => unwrapUniversal(doc(MAX_ATTRIBUTES), true, budget())).not.toThrow();
    const refusal = `over the limit of ${MAX_ATTRIBUTES} attributes on one element (<X>)`;
    expect(() => unwrapUniversal(doc(MAX_ATTRIBUTES + 1), true, budget())).toThrow(refusal);
    // The decoder (not validating): a request accepted before the bound must replay as it did (found by review).
    expect(() => unwrapUniversal(doc(MAX_ATTRIBUTES + 1), false, budget())).not.toThrow();
    // Namespace declarations are attributes to the parser too; a value's `=`, `>` or quote of the other kind is not one.
    expect(() => parseXml(`<r${Array.from({ length: MAX_ATTRIBUTES + 1 }, (_, i) => ` xmlns:p${i}="u"`).join('')}/>`, 'qualified', true, budget())).toThrow(/over the limit/);
    expect(parseXml(`<r a='"b="c" d="e"' f="=>=>"/>`, 'local', true, budget())).toEqual({ r: { '@a': '"b="c" d="e"', '@f': '=>=>' } });
    const flood = sendStreamRequest([{}]).replace('</s:Header>', `${element(360_000, 'h')}</s:Header>`);
    expect(faultOf(flood).message).toBe(`the envelope is over the limit of ${MAX_ATTRIBUTES} attributes on one element (<h>)`);
    expect(faultOf(sendStreamRequest([{ xml: doc(300) }])).message).toBe(refusal);
  });

  // With local names, `a:Ref` and `b:Ref` both became `@Ref`, the last one silently winning.
  test('two attributes of one element sharing a local name are refused, naming the element and both', () => {
    const event = '<UniversalEvent><Event a:Ref="1" b:Ref="2" xmlns:a="x" xmlns:b="y"/></UniversalEvent>';
    expect(() => unwrapUniversal(event, true, budget())).toThrow('not convertible: <Event> has two attributes with the local name Ref (a:Ref and b:Ref)');
    expect(() => parseXml('<r xml:lang="en" lang="fr"/>', 'local', true, budget())).toThrow('(xml:lang and lang)');
    expect(() => parseXml('<r b="1" b="2"/>', 'local', true, budget())).toThrow('not well-formed XML (<r> repeats the attribute b)');
    // Declarations are not attributes of the converted element; different local names, or one per element, are fine.
    expect(parseXml('<r xmlns:a="x" a="1" a:b="2" xmlns="y"><s a:b="3"/></r>', 'local', true, budget())).toEqual({ r: { '@a': '1', '@b': '2', s: { '@b': '3' } } });
    // The decoder reads what the receiver accepted (and what it accepted before this check) as it did.
    expect(unwrapUniversal(event, false, budget())).toMatchObject({ data: { '@Ref': '2' } });
    // A Message's attributes are read by local name too.
    const message = sendStreamRequest([{ trackingId: 'T-1' }]).replace('<Message ', '<Message x:TrackingID="T-2" xmlns:x="urn:x" ');
    expect(faultOf(message).message).toBe('the envelope is not convertible: <Message> has two attributes with the local name TrackingID (x:TrackingID and TrackingID)');
  });

  test(`nesting deeper than ${MAX_DEPTH} is refused before parsing; self-closing and sibling elements add no depth`, () => {
    const nested = (depth: number) => `${'<a>'.repeat(depth)}${'<b/>'.repeat(3)}${'</a>'.repeat(depth)}`;
    expect(() => parseXml(nested(MAX_DEPTH), 'local', true, { units: 10_000 })).not.toThrow();
    expect(() => parseXml(nested(MAX_DEPTH + 1), 'local', true, { units: 10_000 })).toThrow(`nested more than ${MAX_DEPTH} elements deep`);
  });

  // 505 levels around 420 000 empty siblings fitted the budget (one unit an element) and cost about eight times
  // the documented worst request: the parser built each element's path, 505 names long, as a string.
  const deepSiblings = (depth: number, siblings: number) => `${'<a>'.repeat(depth)}${'<b/>'.repeat(siblings)}${'</a>'.repeat(depth)}`;

  test('an element costs one more unit for each 64 levels of its depth', () => {
    const unitsOf = (xml: string) => { const b = { units: 10_000_000 }; parseXml(xml, 'local', true, b); return 10_000_000 - b.units; };
    const text = (xml: string) => Math.ceil(xml.length / TEXT_CHARS_PER_UNIT);
    const shallow = deepSiblings(1, 1000);
    expect(unitsOf(shallow)).toBe(text(shallow) + 1 + 1000);
    const deep = deepSiblings(505, 1000);
    let nesting = 0;
    for (let level = 1; level <= 505; level++) nesting += 1 + Math.floor(level / DEPTH_LEVELS_PER_UNIT);
    expect(unitsOf(deep)).toBe(text(deep) + nesting + 1000 * (1 + Math.floor(506 / DEPTH_LEVELS_PER_UNIT)));
    expect(() => parseXml(deepSiblings(505, 420_000), 'local', true, { units: DEFAULT_LOGISTICS_LIMITS.maxParseUnits })).toThrow(/more markup than this service parses/);
  });

  // 370 000 children of one element, each named differently, fitted the budget and took the parser five times
  // the documented worst request (it keeps an entry per name for each parent).
  test(`past ${FREE_DISTINCT_NAMES} different names among one element's children, each new name costs ${DISTINCT_NAME_UNITS} units more`, () => {
    const unitsOf = (xml: string) => { const b = { units: 10_000_000 }; parseXml(xml, 'local', true, b); return 10_000_000 - b.units; };
    const text = (xml: string) => Math.ceil(xml.length / TEXT_CHARS_PER_UNIT);
    const children = (count: number, name: (i: number) => string) => Array.from({ length: count }, (_, i) => `<${name(i)}/>`).join('');
    const same = `<r>${children(300, () => 'n')}</r>`;
    expect(unitsOf(same)).toBe(text(same) + 1 + 300);
    const distinct = `<r>${children(300, (i) => `n${i}`)}</r>`;
    expect(unitsOf(distinct)).toBe(text(distinct) + 1 + 300 + (300 - FREE_DISTINCT_NAMES) * DISTINCT_NAME_UNITS);
    // Counted per parent: the same 200 names under each of three elements cost nothing more.
    const spread = `<r>${`<p>${children(200, (i) => `n${i}`)}</p>`.repeat(3)}</r>`;
    expect(unitsOf(spread)).toBe(text(spread) + 1 + 3 * 201);
    const flood = `<r>${children(370_000, (i) => `n${i}`)}</r>`;
    expect(() => parseXml(flood, 'local', true, { units: DEFAULT_LOGISTICS_LIMITS.maxParseUnits })).toThrow(/more markup than this service parses/);
  });

  test('parsing does no work proportional to an element\'s depth (no path string built per element)', () => {
    const join = Array.prototype.join;
    let longJoins = 0;
    Array.prototype.join = function (this: unknown[], separator?: string) { if (this.length > 100) longJoins++; return join.call(this, separator); };
    try {
      parseXml(deepSiblings(300, 200), 'local', true, { units: 1_000_000 });
      parseXml(deepSiblings(300, 200), 'qualified', false, { units: 1_000_000 });
    } finally {
      Array.prototype.join = join;
    }
    expect(longJoins).toBe(0);
  });

  test('end tags inside comments and CDATA, or a "/>" inside an attribute value, do not hide nesting past the bound', () => {
    const deep = MAX_DEPTH + 100;
    const fenced = `<!--${'</a>'.repeat(deep)}--><r><![CDATA[${'</a>'.repeat(deep)}]]>${'<a>'.repeat(deep)}${'</a>'.repeat(deep)}</r>`;
    expect(() => parseXml(fenced, 'local', true, { units: 100_000 })).toThrow(`nested more than ${MAX_DEPTH} elements deep`);
    const quoted = `${'<a x="/>">'.repeat(deep)}${'</a>'.repeat(deep)}`;
    expect(() => parseXml(quoted, 'local', true, { units: 100_000 })).toThrow(`nested more than ${MAX_DEPTH} elements deep`);
  });

  test('markup inside CDATA and comments is text: it neither nests nor declares a DTD', () => {
    const note = `<Note><![CDATA[<!DOCTYPE html>${'line<br>'.repeat(MAX_DEPTH + 100)}]]><!-- <!ENTITY x "y"> --></Note>`;
    expect(parseXml(note, 'local', true, { units: 1000 })).toEqual({ Note: `<!DOCTYPE html>${'line<br>'.repeat(MAX_DEPTH + 100)}` });
    expect(() => parseXml('<!DOCTYPE r [<!ENTITY x "y">]><r>&x;</r>', 'local', true, { units: 100 })).toThrow('a document type declaration is not allowed');
  });

  test('an attribute value of megabytes is refused by the budget; within it, it parses (it overflowed the validator of fast-xml-parser 5.2)', () => {
    const doc = `<r a="${'x'.repeat(16 * 1024 * 1024)}"/>`;
    expect(() => parseXml(doc, 'local', true, { units: 500_000 })).toThrow(/more markup than this service parses/);
    expect(parseXml(doc, 'local', true, { units: 1_000_000 })).toEqual({ r: { '@a': 'x'.repeat(16 * 1024 * 1024) } });
  });

  test('a UTF-16 document of odd length is a fault naming its Message', () => {
    const odd = Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from('<a/>', 'utf16le').swap16(), Buffer.from([0x00])]);
    expect(faultOf(sendStreamRequest([{ raw: gzipSync(odd), trackingId: 'T-UTF16' }]))).toMatchObject({ trackingId: 'T-UTF16', message: expect.stringMatching(/UTF-16/) });
  });
});

describe('what fast-xml-parser 5.12 changed, pinned', () => {
  const parse = (xml: string) => parseXml(xml, 'local', true, { units: 100_000 });

  test('a document nested deeper than its default of 100 levels parses (our bound is 512)', () => {
    const deep = `<UniversalInterchange><Body><UniversalShipment><Shipment>${'<SubShipment>'.repeat(150)}x${'</SubShipment>'.repeat(150)}</Shipment></UniversalShipment></Body></UniversalInterchange>`;
    expect(unwrapUniversal(deep, true, { units: 100_000 })).toMatchObject({ kind: 'event', event: 'shipment-update' });
    expect(unwrapUniversal(deep, false, { units: 100_000 })).toMatchObject({ kind: 'event', event: 'shipment-update' });
  });

  test('element names that are Object.prototype members stay as sent; __proto__, constructor and prototype are refused by name', () => {
    expect(parse('<r><toString>1</toString><valueOf a="2"/><hasOwnProperty>3</hasOwnProperty></r>')).toEqual({ r: { toString: '1', valueOf: { '@a': '2' }, hasOwnProperty: '3' } });
    for (const name of ['__proto__', 'constructor', 'prototype', 'x:constructor']) {
      expect(() => parse(`<r xmlns:x="urn:x"><${name}>1</${name}></r>`)).toThrow('an element named __proto__, constructor or prototype, which this service does not convert');
    }
    expect(faultOf(sendStreamRequest([{ xml: '<UniversalEvent><Event><constructor/></Event></UniversalEvent>', trackingId: 'T-PROTO' }])).message).toMatch(/constructor/);
    expect(parse('<r constructor="1" __proto__="2"/>')).toEqual({ r: { '@constructor': '1', '@__proto__': '2' } });
  });

  test('character references: legal ones decode; one to a character XML does not allow is refused (5.12 drops or keeps those silently)', () => {
    expect(parse('<r a="&#9;&#x1F600;">x&#10;&#13;&#x10FFFF;&#65;&#x0041;&apos;&quot;&lt;&gt;&amp;#65;</r>')).toEqual({ r: { '@a': '\t😀', '#text': 'x\n\r\u{10FFFF}AA\'"<>&#65;' } });
    for (const bad of ['&#0;', '&#x0;', '&#xD800;', '&#xDFFF;', '&#xFFFE;', '&#x110000;', '&#99999999999;', '&#8;', '&#;', '&#x;', '&#65', '&#6 5;']) {
      expect(() => parse(`<r>${bad}</r>`)).toThrow('the document has an invalid character reference');
      expect(() => parse(`<r a="${bad}"/>`)).toThrow('the document has an invalid character reference');
    }
    expect(parse('<r><!-- &#0; --><![CDATA[&#0;]]></r>')).toEqual({ r: '&#0;' });
  });

  test('entities: only XML\'s five; an undeclared one (kept as text by 5.12) or an HTML one (decoded under htmlEntities) is refused', () => {
    expect(parse('<r a="&amp;&lt;">&gt;&quot;&apos;</r>')).toEqual({ r: { '@a': '&<', '#text': '>"\'' } });
    for (const bad of ['&foo;', '&nbsp;', '&copy;', '&AMP;', '&amp', '& ']) {
      expect(() => parse(`<r>${bad}</r>`)).toThrow('the document refers to an entity XML does not declare');
      expect(() => parse(`<r a="${bad}"/>`)).toThrow('the document refers to an entity XML does not declare');
    }
    expect(parse('<r><!-- &foo; --><![CDATA[&nbsp;]]></r>')).toEqual({ r: '&nbsp;' });
  });

  test('a character XML does not allow, written as it is (a control character, U+FFFE, a lone surrogate), is refused as its reference is', () => {
    for (const [bad, code] of [['\u0000', '0000'], ['\u0001', '0001'], ['\u001F', '001F'], ['\uFFFE', 'FFFE'], ['\uD800', 'D800'], ['\uDC00x', 'DC00']]) {
      expect(() => parse(`<r>a${bad}b</r>`)).toThrow(`the document holds a character XML does not allow (U+${code})`);
      expect(() => parse(`<r a="${bad}"/>`)).toThrow(`(U+${code})`);
    }
    expect(parse('<r>\t\n\u{1F600}\uFFFD</r>')).toEqual({ r: '\u{1F600}\uFFFD' });
    expect(faultOf(sendStreamRequest([{ xml: '<UniversalEvent><Event>a\u0000b</Event></UniversalEvent>' }])).message).toMatch(/U\+0000/);
  });
});

describe('well-formedness fast-xml-parser\'s validator does not check', () => {
  const parse = (xml: string, validate = true) => parseXml(xml, 'local', validate, { units: 100_000 });

  test.each([
    ['a "<" in an attribute value (WFC: No < in Attribute Values)', '<r><e a="x<y"/></r>', 'a "<" inside a tag, such as in an attribute value'],
    ['a "<" in a single-quoted attribute value', "<r a='<'/>", 'a "<" inside a tag, such as in an attribute value'],
    ['"]]>" in text (XML 1.0 §2.4)', '<r>A]]>B</r>', '"]]>" in text outside a CDATA section'],
    ['"]]>" in text just after a CDATA section', '<r><![CDATA[x]]>]]></r>', '"]]>" in text outside a CDATA section'],
    ['"--" inside a comment (XML 1.0 §2.5)', '<r><!-- a -- b --></r>', '"--" inside a comment'],
    ['a comment ending "--->"', '<r><!-- a ---></r>', '"--" inside a comment'],
  ])('%s is refused where the request arrives, and still read where it was accepted before', (_name, xml, message) => {
    expect(() => parse(xml)).toThrow(`not well-formed XML (${message})`);
    expect(() => parse(xml, false)).not.toThrow();
  });

  test('their neighbours are fine: escaped or in CDATA, "]]>" in an attribute, single dashes in a comment, an empty comment', () => {
    expect(parse('<r a="x&lt;y" b="]]>" c=\'>\'>]] ]]&gt; ]><![CDATA[<x> ]] ]]><!-- a - b --><!----></r>')).toEqual({ r: { '@a': 'x<y', '@b': ']]>', '@c': '>', '#text': ']] ]]> ]><x> ]] ' } });
  });

  test('in a Message or in the envelope, one of them is a Fault', () => {
    expect(faultOf(sendStreamRequest([{ xml: '<UniversalEvent><Event a="x<y"><EventType>ARV</EventType></Event></UniversalEvent>' }])).message).toMatch(/not well-formed XML \(a "<" inside a tag/);
    expect(faultOf(sendStreamRequest([{}]).replace('</s:Header>', '<!-- -- --></s:Header>')).message).toBe('the envelope is not well-formed XML ("--" inside a comment)');
  });
});

describe('a Message\'s encoding (XML 1.0 §4.3.3, Appendix F)', () => {
  const event = (text: string) => `<UniversalEvent><Event><EventType>${text}</EventType></Event></UniversalEvent>`;
  const eventTypeOf = (raw: Buffer) => {
    const [message] = readSendStream(sendStreamRequest([{ raw: gzipSync(raw) }]), LIMITS, true).messages;
    return (unwrapUniversal(message.xml, true, budget()) as unknown as { data: { EventType: string } }).data.EventType;
  };
  test('the encoding a declaration names is the one read; UTF-8 when it names none, or with a byte order mark', () => {
    expect(eventTypeOf(Buffer.from(`<?xml version="1.0" encoding="ISO-8859-1"?>${event('café')}`, 'latin1'))).toBe('café');
    expect(eventTypeOf(Buffer.from(`<?xml version='1.0' encoding='windows-1252'?>${event('€5')}`.replace('€', '\x80'), 'latin1'))).toBe('€5');
    expect(eventTypeOf(Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>${event('café')}`))).toBe('café');
    expect(eventTypeOf(Buffer.from(event('café')))).toBe('café');
    expect(eventTypeOf(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(event('café'))]))).toBe('café');
    expect(eventTypeOf(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`<?xml version="1.0" encoding="UTF-16"?>${event('café')}`, 'utf16le')]))).toBe('café');
  });
  test.each([
    ['bytes that are not UTF-8, with no declaration', Buffer.from(event('café'), 'latin1'), /not valid UTF-8 text/],
    ['bytes that are not UTF-8, declared UTF-8', Buffer.from(`<?xml version="1.0" encoding="utf-8"?>${event('café')}`, 'latin1'), /not valid UTF-8 text/],
    ['an encoding nothing here reads', Buffer.from(`<?xml version="1.0" encoding="x-klingon"?>${event('a')}`), /declares an encoding this service cannot read \(x-klingon\)/],
    // Its ASCII is UTF-8 with a NUL after each character: no declaration is read, and the NULs are refused.
    ['UTF-16 without a byte order mark', Buffer.from(`<?xml version="1.0" encoding="UTF-16"?>${event('a')}`, 'utf16le'), /U\+0000/],
    ['a UTF-8 byte order mark on a document declaring Latin-1', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`<?xml version="1.0" encoding="ISO-8859-1"?>${event('a')}`)]), /byte order mark but declares iso-8859-1/],
  ])('%s is a fault, not U+FFFD in the output', (_name, raw, message) => {
    expect(faultOf(sendStreamRequest([{ raw: gzipSync(raw), trackingId: 'T-ENC' }])).message).toMatch(message);
  });
});

describe('passwords kept out of the received log', () => {
  const wsse = 'http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd';
  const envelope = (token: string) => `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header>${token}</s:Header><s:Body><Ping/></s:Body></s:Envelope>`;

  test.each([
    ['plain text', `<o:Password xmlns:o="${wsse}">pw-secret</o:Password>`],
    ['CDATA', `<o:Password xmlns:o="${wsse}"><![CDATA[pw-secret]]></o:Password>`],
    ['split by a comment', `<o:Password xmlns:o="${wsse}">pw-se<!-- x -->cret</o:Password>`],
    ['a non-ASCII prefix', `<é:Password xmlns:é="${wsse}">pw-secret</é:Password>`],
    ['the 2002 namespace', '<w:Password xmlns:w="http://schemas.xmlsoap.org/ws/2002/07/secext">pw-secret</w:Password>'],
    ['no prefix', '<Password>pw-secret</Password>'],
    ['a > in an attribute', `<o:Password xmlns:o="${wsse}" Id="a>b">pw-secret</o:Password>`],
    ['a comment naming a Password element first', `<!-- <o:Password> --><o:Password xmlns:o="${wsse}">pw-secret</o:Password>`],
  ])('%s: redacted, and the envelope stays well-formed', (_name, token) => {
    const kept = withoutPasswords(envelope(token));
    expect(kept).not.toContain('secret');
    expect(kept).toContain('[redacted]');
    expect(XMLValidator.validate(kept)).toBe(true);
  });

  test('whatever the receiver accepts, the decoder reads within the same budget, though the kept copy is longer (a password shorter than [redacted])', async () => {
    const plugin = createLogisticsTrigger({ ...DEFAULT_LOGISTICS_LIMITS, maxParseUnits: 3000 });
    const node = { name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'] } } as unknown as WorkflowNode;
    const quiet = { enabled: () => false, debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as TriggerServices['logger'];
    const services = { credential: async () => null, store: null as never, logger: quiet };
    const envelopeOf = (passwords: number, elements: number) => sendStreamRequest([{ xml: `<UniversalEvent><Event>${'<b/>'.repeat(elements)}</Event></UniversalEvent>` }])
      .replace('</s:Header>', `${'<Password></Password>'.repeat(passwords)}</s:Header>`);
    const inspected = async (text: string) => {
      const bytes = Buffer.from(text);
      const request = { requestId: 'r-1', workflowId: 'wf', pathSuffix: null, query: {}, headers: { soapaction: SEND_STREAM_ACTION }, remoteAddress: null, receivedAt: Date.now() } as unknown as InboundRequest;
      const outcome = await plugin.inspect(request, node, { size: bytes.length, sha256: () => '', inline: bytes, readStaged: null }, services);
      return outcome.ok ? (outcome.inspection.persistBody ?? bytes) : null;
    };
    for (const passwords of [0, 100, 400]) {
      // The most elements the receiver accepts beside these passwords, found by bisection.
      let [accepted, refused] = [0, 4000];
      while (refused - accepted > 1) {
        const middle = (accepted + refused) >> 1;
        if (await inspected(envelopeOf(passwords, middle))) accepted = middle; else refused = middle;
      }
      const kept = (await inspected(envelopeOf(passwords, accepted)))!;
      if (passwords > 0) expect(kept.toString()).toContain('<Password>[redacted]</Password>');
      const items = await plugin.decode!({ requestId: 'r-1', workflowId: 'wf', receivedAt: Date.now() } as Received, node, { ...services, openBody: null as never, readBody: async () => kept });
      expect(items).toHaveLength(1);
    }
  });

  test('an envelope without a Password element is returned as it is', () => {
    const text = envelope('<o:Username>me</o:Username><!-- Password -->');
    expect(withoutPasswords(text)).toBe(text);
  });
});

describe('what the receiver keeps is what the decoder reads', () => {
  const node = { name: 'Freight', type: 'logisticsTrigger', parameters: { actions: ['event-update'] } } as unknown as WorkflowNode;
  const quiet = { enabled: () => false, debug() {}, info() {}, warn() {}, error() {}, child() { return quiet; } } as unknown as TriggerServices['logger'];
  const services = { credential: async () => null, store: null as never, logger: quiet };
  const inspect = async (plugin: ReturnType<typeof createLogisticsTrigger>, bytes: Buffer) => {
    const request = { requestId: 'r-1', workflowId: 'wf', pathSuffix: null, query: {}, headers: { soapaction: SEND_STREAM_ACTION }, remoteAddress: null, receivedAt: Date.now() } as unknown as InboundRequest;
    return plugin.inspect(request, node, { size: bytes.length, sha256: () => '', inline: bytes, readStaged: null }, services);
  };
  const answerOf = (outcome: Awaited<ReturnType<typeof inspect>>) => {
    if (outcome.ok) throw new Error('accepted');
    return { status: outcome.answer.status, body: String(outcome.answer.body) };
  };

  test('an envelope that is not UTF-8 is an s:Client Fault, not U+FFFD in the workflow\'s data', async () => {
    const plugin = createLogisticsTrigger();
    const sent = sendStreamRequest([{ xml: eventDocument(), trackingId: 'T-Müller' }]);
    expect((await inspect(plugin, Buffer.from(sent, 'utf8'))).ok).toBe(true);
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(sent, 'utf8')]);
    expect((await inspect(plugin, withBom)).ok).toBe(true);
    for (const bytes of [Buffer.from(sent, 'latin1'), Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(sent, 'latin1')])]) {
      const answer = answerOf(await inspect(plugin, bytes));
      expect(answer.status).toBe(500);
      expect(answer.body).toContain('<faultcode>s:Client</faultcode>');
      expect(answer.body).toContain('the envelope is not valid UTF-8 text');
    }
  });

  test('a TrackingID the item writes twice counts twice: a 4.25 MB one is a 413 Fault, not a 200 whose record is too large to decode', async () => {
    const plugin = createLogisticsTrigger();
    const outcome = await inspect(plugin, Buffer.from(sendStreamRequest([{ xml: eventDocument(), trackingId: 'T'.repeat(4_250_000) }])));
    if (outcome.ok) {
      // What the decoder would have made of it: one item over the record limit (dead-lettered as output-too-large).
      const items = await plugin.decode!({ requestId: 'r-1', workflowId: 'wf', receivedAt: Date.now() } as Received, node, { ...services, openBody: null as never, readBody: async () => outcome.inspection.persistBody! });
      expect(Buffer.byteLength(items[0].value)).toBeLessThanOrEqual(MAX_RECORD_BYTES);
    }
    const answer = answerOf(outcome);
    expect(answer.status).toBe(413);
    expect(answer.body).toContain('decode to more than one record holds');
  });

  test('with Raw Body, the path an item writes twice counts: Messages that sum just under the record by the old count are a 413 Fault, not a 200 whose record is too large', async () => {
    const plugin = createLogisticsTrigger();
    const raw = { ...node, parameters: { actions: ['event-update'], options: { rawBody: true } } } as WorkflowNode;
    const xml = '<UniversalEvent><Event/></UniversalEvent>';
    const fileName = `${'f'.repeat(190)}.xml`;
    const room = 8 * 1024 * 1024 - 64 * 1024;
    // The padding that makes 1000 Messages count just under the record when each counts its document twice, its
    // attributes and 256 bytes (the estimate before this fix).
    const attributesOf = (pad: number) => ({ ApplicationCode: 'UDM', ClientID: 'ACMESYD', TrackingID: 't', SchemaName: 'http://www.cargowise.com/Schemas/Universal/2011/11#UniversalInterchange', SchemaType: 'Xml', EmailSubject: '', FileName: fileName, Pad: 'p'.repeat(pad) });
    const oldCount = (pad: number) => 2 * xml.length + Buffer.byteLength(JSON.stringify(attributesOf(pad))) + 256;
    let pad = 0;
    while (1000 * oldCount(pad + 1) <= room - 1000) pad++;
    const text = sendStreamRequest(Array.from({ length: 1000 }, () => ({ xml, trackingId: 't', fileName }))).replace(/ FileName="/g, ` Pad="${'p'.repeat(pad)}" FileName="`);
    const bytes = Buffer.from(text);
    const request = { requestId: 'r-raw', workflowId: 'wf', pathSuffix: null, query: {}, headers: { soapaction: SEND_STREAM_ACTION }, remoteAddress: null, receivedAt: Date.now() } as unknown as InboundRequest;
    const outcome = await plugin.inspect(request, raw, { size: bytes.length, sha256: () => '', inline: bytes, readStaged: null }, services);
    if (outcome.ok) {
      const dir = mkdtempSync(path.join(tmpdir(), 'logistics-raw-'));
      const store = await openFilesystemStore(dir);
      try {
        const items = await plugin.decode!({ requestId: 'r-raw', workflowId: 'wf', receivedAt: Date.now() } as Received, raw, { ...services, store, openBody: null as never, readBody: async () => outcome.inspection.persistBody! });
        const record = defaultAvroCodec().encode('Decoded', { requestId: 'r-raw', workflowId: 'wf', triggerNode: 'Freight', triggerKind: 'logistics', pathSuffix: null, receivedAt: 0, items, duplicateOf: null });
        expect(record.length).toBeLessThanOrEqual(MAX_RECORD_BYTES);
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const answer = answerOf(outcome);
    expect(answer.status).toBe(413);
    expect(answer.body).toContain('decode to more than one record holds');
  }, 60_000);

  test('an envelope whose redacted copy is longer than the decoder reads is a 413 Fault before the accept, never a 200', async () => {
    const limit = 64 * 1024;
    const plugin = createLogisticsTrigger({ ...DEFAULT_LOGISTICS_LIMITS, maxEnvelopeBytes: limit });
    // Empty passwords: each grows by the ten bytes of [redacted] in the copy the received log keeps.
    const envelopeOf = (passwords: number) => {
      const bare = sendStreamRequest([{ xml: eventDocument() }]).replace('</s:Header>', `${'<Password></Password>'.repeat(passwords)}</s:Header>`);
      return Buffer.from(bare.replace('</s:Header>', `<!--${'p'.repeat(limit - 100 - Buffer.byteLength(bare))}--></s:Header>`));
    };
    const fits = envelopeOf(5);
    const grows = envelopeOf(200);
    expect(fits.length).toBeLessThanOrEqual(limit);
    expect(grows.length).toBeLessThanOrEqual(limit);
    const accepted = await inspect(plugin, fits);
    expect(accepted.ok && accepted.inspection.persistBody!.length).toBe(fits.length + 50);
    const answer = answerOf(await inspect(plugin, grows));
    expect(answer.status).toBe(413);
    expect(answer.body).toContain('<faultcode>s:Client</faultcode>');
    expect(answer.body).toContain(`with its passwords redacted (each replaced by [redacted]) is larger than ${limit} bytes`);
  });
});
