import fs from 'fs';
import os from 'os';
import path from 'path';
import { createHash } from 'crypto';
import { Type } from 'avsc';
import {
  AvroDecodeError,
  AvroEncodeError,
  avroBytesLength,
  createAvroCodec,
  findSchemaDir,
  SINGLE_OBJECT_HEADER_LENGTH,
} from '../../services/platform/avro/codec';
import {
  CRC64_AVRO_EMPTY,
  crc64Avro,
  fingerprint,
  fingerprint64,
  parsingCanonicalForm,
} from '../../services/platform/avro/fingerprint';
import type {
  DeadLetter,
  Decoded,
  ExecutionRequested,
  Received,
  RecordName,
} from '../../services/platform/avro/records';

const ROOT = path.resolve(__dirname, '../..');
const SCHEMA_DIR = path.join(ROOT, 'schemas');
const RECORDS: RecordName[] = ['Received', 'Decoded', 'ExecutionRequested', 'DeadLetter', 'Refused', 'MdnDelivery', 'MdnOutcome'];

function loadSchema(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, `${name}.avsc`), 'utf8'));
}

function withoutFields(schema: any, names: string[]): any {
  const copy = JSON.parse(JSON.stringify(schema));
  copy.fields = copy.fields.filter((f: { name: string }) => !names.includes(f.name));
  return copy;
}

/**
 * Independent CRC-64-AVRO: bit at a time (no table), on two unsigned 32-bit
 * halves held in plain numbers instead of a bigint.
 */
function referenceCrc64(bytes: Buffer): bigint {
  const POLY_HI = 0xc15d213a;
  const POLY_LO = 0xa4d7a795;
  let hi = POLY_HI;
  let lo = POLY_LO;
  for (const byte of bytes) {
    lo = (lo ^ byte) >>> 0;
    for (let bit = 0; bit < 8; bit++) {
      const lsb = lo & 1;
      lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
      hi = hi >>> 1;
      if (lsb) {
        hi = (hi ^ POLY_HI) >>> 0;
        lo = (lo ^ POLY_LO) >>> 0;
      }
    }
  }
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** A receiver key's fingerprint: the SHA-256 of its SubjectPublicKeyInfo, lowercase hex. */
const RECEIVER_KEY = Array.from({ length: 32 }, (_, i) => (i * 7 + 16).toString(16).padStart(2, '0')).join('');
const BODY = Buffer.from('{"orderId":"PO-4471","lines":[{"sku":"A-100","qty":3}]}', 'utf8');

function receivedInline(): Received {
  return {
    requestId: 'req_01J9ZK3V8M2Q4T6W8Y0A2C4E6G',
    workflowId: 'wf_orders_inbound',
    triggerNode: 'Webhook',
    triggerKind: 'webhook',
    pathSuffix: 'orders/PO-4471',
    query: { tag: ['rush', 'eu'], source: ['shopify'] },
    headers: {
      'content-type': 'application/json; charset=utf-8',
      'user-agent': 'Shopify-Captain-Hook',
      authorization: '[redacted]',
      'x-request-id': '6f1c0b8e-5a2d-4c11-9d0e-0a7d6b0f3e21',
    },
    contentType: 'application/json; charset=utf-8',
    body: { kind: 'inline', data: BODY },
    receivedAt: 1735689600123,
    principal: 'key:partner-shopify',
    remoteAddress: '203.0.113.42',
    as2: null,
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    idempotencyKey: null,
    duplicateOf: null,
  };
}

function receivedAs2Ref(): Received {
  const payload = Buffer.alloc(5 * 1024 * 1024, 0x41);
  return {
    requestId: 'req_01J9ZK7XQ0AS2EDI',
    workflowId: 'wf_edi_850',
    triggerNode: 'AS2 Inbound',
    triggerKind: 'as2',
    pathSuffix: null,
    query: {},
    headers: {
      'as2-from': 'ACME-CORP',
      'as2-to': 'OUR-COMPANY',
      'message-id': '<20250101-120000-1234@acme.example>',
      'content-type': 'application/pkcs7-mime; smime-type=enveloped-data',
    },
    contentType: 'application/pkcs7-mime; smime-type=enveloped-data',
    body: {
      kind: 'ref',
      path: 'bodies/wf_edi_850/req_01J9ZK7XQ0AS2EDI',
      size: payload.length,
      sha256: createHash('sha256').update(payload).digest('hex'),
    },
    receivedAt: 1735689700456,
    principal: null,
    remoteAddress: null,
    as2: {
      messageId: '<20250101-120000-1234@acme.example>',
      from: 'ACME-CORP',
      to: 'OUR-COMPANY',
      subject: 'EDI 850 Purchase Order',
      contentType: 'application/edi-x12',
      mdn: Buffer.from('content-type: multipart/report; report-type=disposition-notification; boundary="b"\r\nmessage-id: <mdn-1@our-company>\r\n\r\n--b--\r\n', 'latin1'),
      asyncMdn: null,
      receiverKey: RECEIVER_KEY,
    },
    traceparent: null,
    idempotencyKey: null,
    duplicateOf: null,
  };
}

function decoded(): Decoded {
  return {
    requestId: 'req_01J9ZK3V8M2Q4T6W8Y0A2C4E6G',
    workflowId: 'wf_orders_inbound',
    triggerNode: 'Webhook',
    triggerKind: 'webhook',
    pathSuffix: 'orders/PO-4471',
    receivedAt: 1735689600123,
    duplicateOf: null,
    items: [
      {
        value: JSON.stringify({ body: { orderId: 'PO-4471' }, query: { tag: ['rush', 'eu'] } }),
        files: ['files/req_01J9ZK3V8M2Q4T6W8Y0A2C4E6G/0/invoice.pdf', 'files/req_01J9ZK3V8M2Q4T6W8Y0A2C4E6G/0/label.png'],
        sourceIndex: 0,
      },
      { value: '{"body":{"orderId":"PO-4472"}}', files: [], sourceIndex: 2 },
    ],
  };
}

function executionRequested(replayOf: string | null): ExecutionRequested {
  return {
    executionId: 'exe_7c9e6679-7425-40de-944b-e07fc1f90ae7',
    requestId: 'req_01J9ZK3V8M2Q4T6W8Y0A2C4E6G',
    workflowId: 'wf_orders_inbound',
    triggerNode: 'Webhook',
    triggerKind: 'warehouse',
    input: '{"json":{"orderId":"PO-4471"},"binary":{}}',
    batchIndex: 1,
    batchSize: 2,
    receivedAt: 1735689600123,
    requestedAt: 1735689600789,
    replayOf,
  };
}

function deadLetter(): DeadLetter {
  return {
    stage: 'decoder',
    errorCode: 'body-not-json',
    message: 'Unexpected token < in JSON at position 0',
    attempts: 3,
    failedAt: 1735689601000,
    workflowId: 'wf_orders_inbound',
    source: {
      topic: 'ingress.received.v1',
      partition: 7,
      offset: '9007199254740993',
      key: Buffer.from('wf_orders_inbound', 'utf8'),
      value: Buffer.from([0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0x00, 0xff]),
      headers: { 'ingress-attempt': '3', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    },
  };
}

function expectDecodeError(fn: () => unknown, code: string, message: RegExp): AvroDecodeError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(AvroDecodeError);
  const err = caught as AvroDecodeError;
  expect(err.code).toBe(code);
  expect(err.message).toMatch(message);
  return err;
}

describe('CRC-64-AVRO fingerprint', () => {
  it('gives the spec empty value for no input', () => {
    expect(crc64Avro(Buffer.alloc(0))).toBe(0xc15d213aa4d7a795n);
    expect(CRC64_AVRO_EMPTY).toBe(0xc15d213aa4d7a795n);
    expect(referenceCrc64(Buffer.alloc(0))).toBe(0xc15d213aa4d7a795n);
  });

  it('matches an independent bit-at-a-time implementation', () => {
    const inputs = [
      '"int"',
      '"string"',
      '"null"',
      'a',
      '\u00e9t\u00e9 \u{1f680}',
      ...RECORDS.map((n) => parsingCanonicalForm(loadSchema(n))),
    ].map((s) => Buffer.from(s, 'utf8'));
    const random = Buffer.alloc(4096);
    for (let i = 0; i < random.length; i++) random[i] = (i * 131 + 7) & 0xff;
    inputs.push(random);
    for (const input of inputs) {
      expect(crc64Avro(input)).toBe(referenceCrc64(input));
    }
    // and the reference itself is not trivially constant
    expect(referenceCrc64(Buffer.from('"int"'))).not.toBe(referenceCrc64(Buffer.from('"long"')));
  });

  it('matches the published Apache Avro test vectors (schema-tests.txt, signed 64-bit)', () => {
    const published: Array<[unknown, string, bigint]> = [
      ['null', '"null"', 7195948357588979594n],
      [{ type: 'boolean' }, '"boolean"', -6970731678124411036n],
      ['"int"', '"int"', 8247732601305521295n],
      ['long', '"long"', -3434872931120570953n],
      ['string', '"string"', -8142146995180207161n],
      [{ type: 'fixed', name: 'foo', size: 15 }, '{"name":"foo","type":"fixed","size":15}', 1756455273707447556n],
      [
        { type: 'record', name: 'foo', fields: [{ name: 'f1', type: 'boolean' }] },
        '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"}]}',
        7843277075252814651n,
      ],
    ];
    for (const [schema, canonical, signed] of published) {
      expect(parsingCanonicalForm(schema as object)).toBe(canonical);
      expect(BigInt.asIntN(64, fingerprint64(schema as object))).toBe(signed);
      const bytes = fingerprint(schema as object);
      expect(bytes).toHaveLength(8);
      expect(bytes.readBigInt64LE(0)).toBe(signed);
    }
    // "null" as the little-endian bytes a single-object header carries
    expect(fingerprint('null').toString('hex')).toBe('8a8f25cce724dd63');
  });

  it('fingerprints the Parsing Canonical Form, ignoring doc, defaults and namespace spelling', () => {
    const a = {
      type: 'record',
      name: 'Thing',
      namespace: 'ingress.v1',
      doc: 'a thing',
      fields: [
        { name: 'id', type: 'string', doc: 'id' },
        { name: 'note', type: ['null', 'string'], default: null },
      ],
    };
    const b = {
      name: 'ingress.v1.Thing',
      type: 'record',
      fields: [
        { type: 'string', name: 'id' },
        { type: ['null', 'string'], name: 'note' },
      ],
    };
    const canonical =
      '{"name":"ingress.v1.Thing","type":"record","fields":[{"name":"id","type":"string"},{"name":"note","type":["null","string"]}]}';
    expect(parsingCanonicalForm(a)).toBe(canonical);
    expect(parsingCanonicalForm(b)).toBe(canonical);
    expect(fingerprint(a).equals(fingerprint(b))).toBe(true);
    expect(fingerprint64(a)).toBe(referenceCrc64(Buffer.from(canonical)));
  });
});

describe('Avro codec', () => {
  const codec = createAvroCodec();

  it('finds schemas/ next to package.json from sources and from dist/', () => {
    expect(findSchemaDir(path.join(ROOT, 'services/platform/avro'))).toBe(SCHEMA_DIR);
    expect(findSchemaDir(path.join(ROOT, 'dist/services/platform/avro'))).toBe(SCHEMA_DIR);
  });

  it('writes the single-object header: C3 01 + little-endian CRC-64-AVRO of the canonical schema', () => {
    for (const name of RECORDS) {
      const expected = Buffer.alloc(8);
      expected.writeBigUInt64LE(referenceCrc64(Buffer.from(JSON.stringify(Type.forSchema(loadSchema(name)).schema()))));
      expect(codec.fingerprintOf(name).equals(expected)).toBe(true);
    }
    const buf = codec.encode('ExecutionRequested', executionRequested(null));
    expect(buf[0]).toBe(0xc3);
    expect(buf[1]).toBe(0x01);
    expect(buf.subarray(2, 10).equals(codec.fingerprintOf('ExecutionRequested'))).toBe(true);
    // the payload is the plain Avro binary of the record
    const plain = Type.forSchema(loadSchema('ExecutionRequested')).toBuffer(executionRequested(null));
    expect(buf.subarray(SINGLE_OBJECT_HEADER_LENGTH).equals(plain)).toBe(true);
    expect(codec.nameOf(buf)).toBe('ExecutionRequested');
    // fingerprintOf hands out a copy
    codec.fingerprintOf('ExecutionRequested').fill(0);
    expect(codec.encode('ExecutionRequested', executionRequested(null)).equals(buf)).toBe(true);
    // distinct records have distinct fingerprints
    expect(new Set(RECORDS.map((n) => codec.fingerprintOf(n).toString('hex'))).size).toBe(RECORDS.length);
  });

  it('round-trips Received with an inline body and no AS2 envelope', () => {
    const value = receivedInline();
    const buf = codec.encode('Received', value);
    expect(codec.nameOf(buf)).toBe('Received');
    const back = codec.decode('Received', buf);
    expect(back).toEqual(value);
    expect(back.body.kind).toBe('inline');
    if (back.body.kind !== 'inline') throw new Error('unreachable');
    expect(Buffer.isBuffer(back.body.data)).toBe(true);
    expect(back.body.data.toString('utf8')).toBe(BODY.toString('utf8'));
    expect(back.query.tag).toEqual(['rush', 'eu']);
    expect(back.as2).toBeNull();
    expect(back.traceparent).toBe('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  });

  it('decodes a bytes field as a view of the buffer given, not a copy, through a resolver too, and refuses one cut short', () => {
    const viewOf = (data: Buffer, buf: Buffer) =>
      data.buffer === buf.buffer && data.byteOffset >= buf.byteOffset && data.byteOffset + data.length <= buf.byteOffset + buf.length;
    const buf = codec.encode('Received', receivedInline());
    const back = codec.decode('Received', buf);
    if (back.body.kind !== 'inline') throw new Error('unreachable');
    expect(viewOf(back.body.data, buf)).toBe(true);
    expect(back.body.data.equals(BODY)).toBe(true);
    // Written with the schema before As2Envelope carried the MDN: read through a resolver into the current reader.
    const previous = JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, 'history', 'Received.1.avsc'), 'utf8'));
    const plain = { ...receivedInline(), body: { 'ingress.v1.InlineBody': { data: BODY } } };
    const old = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(previous), Type.forSchema(previous, { wrapUnions: 'auto' }).toBuffer(plain)]);
    const resolved = codec.decode('Received', old);
    if (resolved.body.kind !== 'inline') throw new Error('unreachable');
    expect(viewOf(resolved.body.data, old)).toBe(true);
    expect(resolved.body.data.equals(BODY)).toBe(true);
    // A body whose length runs past the end is a truncated record, as when avsc copied it.
    expect(() => codec.decode('Received', buf.subarray(0, buf.length - 1 - BODY.length / 2))).toThrow(/truncated buffer/);
    // An MDN's bytes, the other bytes field a stage decodes, likewise.
    const delivery = codec.encode('MdnDelivery', {
      requestId: 'r', workflowId: 'w', messageId: 'm', mdnMessageId: 'mm', url: 'https://partner.example/mdn', allowedBy: 'https://partner.example/',
      mdn: Buffer.from('Content-Type: text/plain\r\n\r\nok'), receivedAt: 1, dueAt: 2, attempts: [],
    });
    expect(viewOf(codec.decode('MdnDelivery', delivery).mdn, delivery)).toBe(true);
  });

  it('round-trips Received with a body reference and an AS2 envelope', () => {
    const value = receivedAs2Ref();
    const buf = codec.encode('Received', value);
    const back = codec.decode('Received', buf);
    expect(back).toEqual(value);
    expect(back.body).toEqual({
      kind: 'ref',
      path: 'bodies/wf_edi_850/req_01J9ZK7XQ0AS2EDI',
      size: 5242880,
      sha256: createHash('sha256').update(Buffer.alloc(5 * 1024 * 1024, 0x41)).digest('hex'),
    });
    expect(back.as2).toEqual({
      messageId: '<20250101-120000-1234@acme.example>',
      from: 'ACME-CORP',
      to: 'OUR-COMPANY',
      subject: 'EDI 850 Purchase Order',
      contentType: 'application/edi-x12',
      mdn: value.as2!.mdn,
      asyncMdn: null,
      receiverKey: RECEIVER_KEY,
    });
    expect(Buffer.isBuffer(back.as2!.mdn)).toBe(true);
    expect(back.as2!.mdn!.toString('latin1')).toContain('message-id: <mdn-1@our-company>');
    expect(back.pathSuffix).toBeNull();
    expect(back.principal).toBeNull();
    expect(back.remoteAddress).toBeNull();
  });

  it('tells how long an inline body makes a record, from its encoding with an empty one (avroBytesLength)', () => {
    const bytes = Type.forSchema('bytes');
    const empty = codec.encode('Received', { ...receivedInline(), body: { kind: 'inline', data: Buffer.alloc(0) } }).length;
    // Around each length where the varint grows a byte (2^6, 2^13, 2^20 bytes: zig-zag doubles them).
    for (const n of [0, 1, 63, 64, 65, 8191, 8192, 8193, 1048575, 1048576, 1048577]) {
      expect(avroBytesLength(n)).toBe(bytes.toBuffer(Buffer.alloc(n)).length);
      const whole = codec.encode('Received', { ...receivedInline(), body: { kind: 'inline', data: Buffer.alloc(n, 7) } }).length;
      expect(empty - avroBytesLength(0) + avroBytesLength(n)).toBe(whole);
    }
    // Beyond what 32-bit shifts would carry (a length of 2^30 has a zig-zag of 2^31).
    expect(avroBytesLength(2 ** 30)).toBe(2 ** 30 + 5);
  });

  it('round-trips a large inline body (beyond the encoder scratch buffer)', () => {
    const big = Buffer.alloc(300 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    const value: Received = { ...receivedInline(), body: { kind: 'inline', data: big } };
    const buf = codec.encode('Received', value);
    expect(buf.length).toBeGreaterThan(big.length);
    const back = codec.decode('Received', buf);
    if (back.body.kind !== 'inline') throw new Error(`expected inline, got ${back.body.kind}`);
    expect(back.body.data.equals(big)).toBe(true);
    // a small record after the big one is unaffected
    expect(codec.decode('Decoded', codec.encode('Decoded', decoded()))).toEqual(decoded());
  });

  it('round-trips Decoded', () => {
    const value = decoded();
    const back = codec.decode('Decoded', codec.encode('Decoded', value));
    expect(back).toEqual(value);
    expect(JSON.parse(back.items[0].value)).toEqual({ body: { orderId: 'PO-4471' }, query: { tag: ['rush', 'eu'] } });
    expect(back.items[0].files).toHaveLength(2);
    expect(back.items[1].files).toEqual([]);
  });

  it('round-trips ExecutionRequested with and without replayOf', () => {
    const first = codec.decode('ExecutionRequested', codec.encode('ExecutionRequested', executionRequested(null)));
    expect(first).toEqual(executionRequested(null));
    expect(first.replayOf).toBeNull();
    const replay = executionRequested('exe_1b4e28ba-2fa1-11d2-883f-0016d3cca427');
    const second = codec.decode('ExecutionRequested', codec.encode('ExecutionRequested', replay));
    expect(second).toEqual(replay);
    expect(second.replayOf).toBe('exe_1b4e28ba-2fa1-11d2-883f-0016d3cca427');
    expect(second.triggerKind).toBe('warehouse');
  });

  it('round-trips DeadLetter, with and without a key', () => {
    const value = deadLetter();
    const back = codec.decode('DeadLetter', codec.encode('DeadLetter', value));
    expect(back).toEqual(value);
    expect(back.source.key!.toString('utf8')).toBe('wf_orders_inbound');
    expect(back.source.value.equals(value.source.value)).toBe(true);
    expect(back.source.offset).toBe('9007199254740993');

    const keyless: DeadLetter = { ...value, workflowId: null, source: { ...value.source, key: null } };
    const back2 = codec.decode('DeadLetter', codec.encode('DeadLetter', keyless));
    expect(back2.source.key).toBeNull();
    expect(back2.workflowId).toBeNull();
    expect(back2.stage).toBe('decoder');
  });

  it('rejects buffers without the single-object marker or with a truncated header', () => {
    const good = codec.encode('Decoded', decoded());
    expectDecodeError(() => codec.decode('Decoded', good.subarray(0, 6)), 'not-single-object', /^not an Avro single-object record/);
    expectDecodeError(() => codec.decode('Decoded', good.subarray(0, 1)), 'not-single-object', /^not an Avro single-object record/);
    expectDecodeError(() => codec.decode('Decoded', Buffer.alloc(0)), 'not-single-object', /^not an Avro single-object record/);
    const wrongMarker = Buffer.from(good);
    wrongMarker[0] = 0x4f; // e.g. the start of a data file ("Obj\x01")
    expectDecodeError(() => codec.decode('Decoded', wrongMarker), 'not-single-object', /^not an Avro single-object record.*4f01/);
    expectDecodeError(() => codec.nameOf(Buffer.from('{"requestId":"x"}')), 'not-single-object', /not an Avro single-object record/);
  });

  it('rejects a truncated payload or trailing bytes as malformed', () => {
    const good = codec.encode('Decoded', decoded());
    const truncated = good.subarray(0, good.length - 5);
    const err = expectDecodeError(() => codec.decode('Decoded', truncated), 'malformed', /truncated/);
    expect(err.fingerprint).toBe(codec.fingerprintOf('Decoded').toString('hex'));
    const trailing = Buffer.concat([good, Buffer.from([0])]);
    expectDecodeError(() => codec.decode('Decoded', trailing), 'malformed', /trailing/);
  });

  it('names an unknown writer fingerprint', () => {
    const buf = Buffer.from(codec.encode('Decoded', decoded()));
    Buffer.from('0102030405060708', 'hex').copy(buf, 2);
    const err = expectDecodeError(() => codec.decode('Decoded', buf), 'unknown-schema', /0102030405060708/);
    expect(err.fingerprint).toBe('0102030405060708');
    expect(err.message).toContain('0x0807060504030201');
    expectDecodeError(() => codec.nameOf(buf), 'unknown-schema', /0102030405060708/);
  });

  it('refuses to decode one record as another', () => {
    const buf = codec.encode('Decoded', decoded());
    expectDecodeError(() => codec.decode('Received', buf), 'wrong-record', /Decoded, not a Received/);
  });

  it('rejects invalid values on encode with the offending paths', () => {
    const bad = { ...executionRequested(null), batchIndex: 1.5, requestId: undefined } as unknown as ExecutionRequested;
    let caught: unknown;
    try {
      codec.encode('ExecutionRequested', bad);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(AvroEncodeError);
    expect((caught as AvroEncodeError).code).toBe('invalid-value');
    expect((caught as AvroEncodeError).paths.sort()).toEqual(['batchIndex', 'requestId']);
    const badBody = { ...receivedInline(), body: { kind: 'ref', path: 'x', size: 'big', sha256: 'ab' } } as unknown as Received;
    expect(() => codec.encode('Received', badBody)).toThrow(/body\.ingress\.v1\.BodyRef\.size/);
  });

  describe('schema evolution', () => {
    const current = loadSchema('Received');

    it('(a) an older reader (no traceparent, no remoteAddress) reads a record written with the current schema', () => {
      const oldReader = createAvroCodec({ readerSchemas: { Received: withoutFields(current, ['traceparent', 'remoteAddress']) } });
      const value = receivedInline();
      const buf = codec.encode('Received', value);
      const back = oldReader.decode('Received', buf) as unknown as Record<string, unknown>;
      expect(back).not.toHaveProperty('traceparent');
      expect(back).not.toHaveProperty('remoteAddress');
      const { traceparent: _t, remoteAddress: _r, ...rest } = value;
      expect(back).toEqual(rest);
      expect(back.principal).toBe('key:partner-shopify');
      expect((back.body as { kind: string }).kind).toBe('inline');
      // the older reader's codec still writes with the current schema
      expect(oldReader.fingerprintOf('Received').equals(codec.fingerprintOf('Received'))).toBe(true);
    });

    it('(b) the current reader reads a record written with an older schema lacking defaulted fields', () => {
      const oldSchema = withoutFields(current, ['traceparent', 'remoteAddress', 'principal']);
      // an "old service" writes with its own schemas/ folder
      const oldDir = fs.mkdtempSync(path.join(os.tmpdir(), 'avro-old-'));
      try {
        for (const name of RECORDS) fs.copyFileSync(path.join(SCHEMA_DIR, `${name}.avsc`), path.join(oldDir, `${name}.avsc`));
        fs.writeFileSync(path.join(oldDir, 'Received.avsc'), JSON.stringify(oldSchema));
        const oldWriter = createAvroCodec({ schemaDir: oldDir });
        const { traceparent: _t, remoteAddress: _r, principal: _p, ...oldValue } = receivedAs2Ref();
        const buf = oldWriter.encode('Received', oldValue as unknown as Received);
        expect(buf.subarray(2, 10).equals(fingerprint(oldSchema))).toBe(true);
        expect(buf.subarray(2, 10).equals(codec.fingerprintOf('Received'))).toBe(false);

        // unknown to a codec that has not been told about the old schema
        const hex = fingerprint(oldSchema).toString('hex');
        expectDecodeError(() => codec.decode('Received', buf), 'unknown-schema', new RegExp(hex));

        const reader = createAvroCodec({ extraWriterSchemas: [oldSchema] });
        expect(reader.nameOf(buf)).toBe('Received');
        const back = reader.decode('Received', buf);
        expect(back).toEqual({ ...oldValue, traceparent: null, remoteAddress: null, principal: null });
        expect(back.as2?.from).toBe('ACME-CORP');
        expect(back.body.kind).toBe('ref');
        // decoding again goes through the cached resolver and gives the same result
        expect(reader.decode('Received', buf)).toEqual(back);
      } finally {
        fs.rmSync(oldDir, { recursive: true, force: true });
      }
    });

    it('(b) historical writer schemas are picked up from schemas/history/', () => {
      const oldSchema = withoutFields(current, ['traceparent']);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'avro-hist-'));
      try {
        for (const name of RECORDS) fs.copyFileSync(path.join(SCHEMA_DIR, `${name}.avsc`), path.join(dir, `${name}.avsc`));
        fs.mkdirSync(path.join(dir, 'history'));
        fs.writeFileSync(path.join(dir, 'history', 'Received.v1.avsc'), JSON.stringify(oldSchema, null, 2));
        const plainOld = Type.forSchema(oldSchema);
        const { traceparent: _t, ...oldValue } = receivedInline();
        const avroOld = { ...oldValue, body: { 'ingress.v1.InlineBody': { data: BODY } } };
        const buf = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(oldSchema), plainOld.toBuffer(avroOld)]);
        const back = createAvroCodec({ schemaDir: dir }).decode('Received', buf);
        expect(back).toEqual({ ...oldValue, traceparent: null });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('(b) a Received written before As2Envelope carried the MDN (schemas/history/Received.1.avsc) decodes with mdn null', () => {
      const previous = JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, 'history', 'Received.1.avsc'), 'utf8'));
      const envelopeOf = (schema: any) => schema.fields.find((f: { name: string }) => f.name === 'as2').type[1].fields.map((f: { name: string }) => f.name);
      expect(envelopeOf(previous)).not.toContain('mdn');
      expect(envelopeOf(current)).toContain('mdn');
      // Written exactly as the service before the change wrote it: its schema's fingerprint, its binary.
      const { mdn: _m, asyncMdn: _a, receiverKey: _r, ...oldEnvelope } = receivedAs2Ref().as2!;
      const oldValue = { ...receivedAs2Ref(), as2: oldEnvelope };
      const avroOld = { ...oldValue, body: { 'ingress.v1.BodyRef': { path: 'bodies/wf_edi_850/req_01J9ZK7XQ0AS2EDI', size: 5242880, sha256: (oldValue.body as { sha256: string }).sha256 } } };
      const buf = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(previous), Type.forSchema(previous, { wrapUnions: 'auto' }).toBuffer(avroOld)]);
      expect(buf.subarray(2, 10).equals(codec.fingerprintOf('Received'))).toBe(false);
      const back = codec.decode('Received', buf);
      expect(back.as2).toEqual({ ...oldEnvelope, mdn: null, asyncMdn: null, receiverKey: null });
      expect(back).toEqual({ ...oldValue, as2: { ...oldEnvelope, mdn: null, asyncMdn: null, receiverKey: null } });
      // A record without an AS2 envelope, from the same old writer, still decodes too.
      const plain = { ...receivedInline(), body: { 'ingress.v1.InlineBody': { data: BODY } } };
      const plainBuf = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(previous), Type.forSchema(previous, { wrapUnions: 'auto' }).toBuffer(plain)]);
      expect(codec.decode('Received', plainBuf)).toEqual(receivedInline());
    });

    it('(b) a Received written before the receiver key was recorded (schemas/history/Received.4.avsc) decodes with receiverKey null', () => {
      const previous = JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, 'history', 'Received.4.avsc'), 'utf8'));
      const envelopeOf = (schema: any) => schema.fields.find((f: { name: string }) => f.name === 'as2').type[1].fields.map((f: { name: string }) => f.name);
      expect(envelopeOf(previous)).not.toContain('receiverKey');
      expect(envelopeOf(current)).toContain('receiverKey');
      const { receiverKey: _r, ...oldEnvelope } = receivedAs2Ref().as2!;
      const oldValue = { ...receivedAs2Ref(), as2: oldEnvelope };
      const avroOld = { ...oldValue, body: { 'ingress.v1.BodyRef': { path: 'bodies/wf_edi_850/req_01J9ZK7XQ0AS2EDI', size: 5242880, sha256: (oldValue.body as { sha256: string }).sha256 } } };
      const buf = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(previous), Type.forSchema(previous, { wrapUnions: 'auto' }).toBuffer(avroOld)]);
      expect(codec.decode('Received', buf)).toEqual({ ...oldValue, as2: { ...oldEnvelope, receiverKey: null } });
    });

    it('(b) an MdnOutcome written before `dead_lettered` (schemas/history/MdnOutcome.1.avsc) still decodes', () => {
      const previous = JSON.parse(fs.readFileSync(path.join(SCHEMA_DIR, 'history', 'MdnOutcome.1.avsc'), 'utf8'));
      const symbols = (schema: any) => schema.fields.find((f: { name: string }) => f.name === 'outcome').type.symbols;
      expect(symbols(previous)).toEqual(['delivered', 'retrying', 'given_up']);
      expect(symbols(loadSchema('MdnOutcome'))).toEqual(['delivered', 'retrying', 'given_up', 'dead_lettered']);
      const old = {
        requestId: 'r-1', workflowId: 'wf', messageId: '<m@p>', mdnMessageId: '<mdn@i>', url: 'https://partner.example/mdn',
        outcome: 'given_up' as const, attempts: 3, at: 1_700_000_000_000, status: 500, reason: 'HTTP 500', nextAttemptAt: null,
      };
      const buf = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(previous), Type.forSchema(previous, { wrapUnions: 'auto' }).toBuffer(old)]);
      expect(buf.subarray(2, 10).equals(codec.fingerprintOf('MdnOutcome'))).toBe(false);
      expect(codec.decode('MdnOutcome', buf)).toEqual(old);
    });

    it('(c) a reader field without a default that the writer lacks is a clear incompatible-schema error', () => {
      const newer = JSON.parse(JSON.stringify(current));
      newer.fields.push({ name: 'tenantId', type: 'string', doc: 'new, and no default' });
      const strictReader = createAvroCodec({ readerSchemas: { Received: newer } });
      const buf = codec.encode('Received', receivedInline());
      const err = expectDecodeError(
        () => strictReader.decode('Received', buf),
        'incompatible-schema',
        /cannot read ingress\.v1\.Received written with schema [0-9a-f]{16} using the reader schema for Received: .*tenantId/,
      );
      expect(err.fingerprint).toBe(codec.fingerprintOf('Received').toString('hex'));
      // the failure is cached and reported the same way again
      expectDecodeError(() => strictReader.decode('Received', buf), 'incompatible-schema', /tenantId/);
      // other records are unaffected
      expect(strictReader.decode('Decoded', codec.encode('Decoded', decoded()))).toEqual(decoded());
    });

    it('(c) an incompatible type change is a clear incompatible-schema error', () => {
      const changed = JSON.parse(JSON.stringify(loadSchema('ExecutionRequested')));
      changed.fields.find((f: { name: string }) => f.name === 'batchIndex').type = 'string';
      const reader = createAvroCodec({ readerSchemas: { ExecutionRequested: changed } });
      expectDecodeError(
        () => reader.decode('ExecutionRequested', codec.encode('ExecutionRequested', executionRequested(null))),
        'incompatible-schema',
        /ExecutionRequested/,
      );
    });
  });
});

test('a Received record with every schema field set (none at its default) comes back whole', () => {
  const codec = createAvroCodec();
  const received: Received = {
    requestId: 'r-1', workflowId: 'wf-1', triggerNode: 'Hook', triggerKind: 'as2', pathSuffix: 'a/b', query: { q: ['1', '2'] },
    headers: { 'content-type': 'application/pkcs7-mime' }, contentType: 'application/pkcs7-mime',
    body: { kind: 'ref', path: 'raw/wf-1/2026-01-01/r-1', size: 12, sha256: 'ab'.repeat(32) }, receivedAt: 1_700_000_000_000,
    principal: 'as2:PARTNER', remoteAddress: '127.0.0.1',
    as2: { messageId: '<m@p>', from: 'PARTNER', to: 'US', subject: 'po', contentType: 'application/edi-x12', mdn: Buffer.from('mdn'), asyncMdn: { url: 'https://partner.example/as2/mdn/1', allowedBy: 'https://partner.example/as2/mdn' }, receiverKey: RECEIVER_KEY },
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    idempotencyKey: 'order-42',
    duplicateOf: 'r-0',
  };
  // Each field of the current schema is set here, so a field the codec's mapping forgot cannot hide behind its default.
  const fields = (loadSchema('Received').fields as { name: string }[]).map((f) => f.name);
  expect(Object.keys(received).sort()).toEqual([...fields].sort());
  for (const name of fields) expect({ name, value: received[name as keyof Received] }).not.toEqual({ name, value: null });
  expect(codec.decode('Received', codec.encode('Received', received))).toEqual(received);
  const inline: Received = { ...received, body: { kind: 'inline', data: Buffer.from('{}') } };
  expect(codec.decode('Received', codec.encode('Received', inline))).toEqual(inline);
});

test('records encoded one after another stay intact, small ones sharing memory and large ones not', () => {
  const codec = createAvroCodec();
  const received = (i: number, bodyBytes: number): Received => ({
    requestId: `r-${i}`, workflowId: 'wf-1', triggerNode: 'Hook', triggerKind: 'webhook', pathSuffix: null, query: {},
    headers: { 'content-type': 'application/json' }, contentType: 'application/json',
    body: { kind: 'inline', data: Buffer.alloc(bodyBytes, i % 251) }, receivedAt: 1_700_000_000_000 + i,
    principal: null, remoteAddress: null, as2: null, traceparent: null, idempotencyKey: null, duplicateOf: null,
  });
  // Enough records to fill several shared blocks, sizes that rarely fit what is left, and some too large to share.
  const values = Array.from({ length: 300 }, (_, i) => received(i, i % 50 === 7 ? 70_000 : (i * 131) % 3000));
  const encoded = values.map((v) => codec.encode('Received', v));
  encoded.forEach((buf, i) => expect(codec.decode('Received', buf)).toEqual(values[i]));
  const shared = encoded.filter((b) => b.buffer.byteLength > b.length);
  const own = encoded.filter((b) => b.buffer.byteLength === b.length);
  expect(shared.length).toBeGreaterThan(250);
  expect(own.length).toBe(6); // the six 70 kB bodies
});

describe('Refused (the request journal\'s record of a refusal)', () => {
  const refusedCodec = createAvroCodec();
  it('round-trips, its optional fields null and its kind free text', () => {
    const value = {
      requestId: 'r-1', workflowId: 'wf', triggerNode: 'In', triggerKind: 'a-future-kind', status: 429, code: 'rate-limited',
      receivedAt: 1_700_000_000_123, remoteAddress: '2001:db8::1', messageId: '<m@partner>', bodyBytes: 0, traceparent: null,
    };
    expect(refusedCodec.decode('Refused', refusedCodec.encode('Refused', value))).toEqual(value);
    const bare = { ...value, triggerNode: null, triggerKind: null, code: null, remoteAddress: null, messageId: null };
    expect(refusedCodec.decode('Refused', refusedCodec.encode('Refused', bare))).toEqual(bare);
    expect(refusedCodec.nameOf(refusedCodec.encode('Refused', value))).toBe('Refused');
    expect(() => refusedCodec.decode('Received', refusedCodec.encode('Refused', value))).toThrow(/Refused/);
  });
});

/**
 * Every retired schema must still resolve into the current reader schema of its record: the codec builds a
 * resolver only when a record of that writer first arrives, so a history file that no longer resolves would
 * otherwise fail at decode time, in production, as `incompatible-schema`.
 */
describe('schemas/history/', () => {
  const HISTORY_DIR = path.join(SCHEMA_DIR, 'history');
  const files = fs.readdirSync(HISTORY_DIR).filter((f) => f.endsWith('.avsc')).sort();
  // Parsed as the codec parses them (codec.ts parseSchema), so the resolvers are the ones it would build.
  const parse = (schema: object) => Type.forSchema(schema as any, { wrapUnions: 'auto', omitRecordMethods: true });

  it('holds only <Record>.<n>.avsc files, numbered 1, 2, … per record', () => {
    expect(files.length).toBeGreaterThan(0);
    const numbers = new Map<string, number[]>();
    for (const file of files) {
      const m = /^([A-Za-z]+)\.([1-9][0-9]*)\.avsc$/.exec(file);
      expect({ file, named: m !== null && (RECORDS as string[]).includes(m[1]) }).toEqual({ file, named: true });
      numbers.set(m![1], [...(numbers.get(m![1]) ?? []), Number(m![2])]);
    }
    for (const [name, ns] of numbers) expect({ name, numbers: ns.sort((a, b) => a - b) }).toEqual({ name, numbers: ns.map((_, i) => i + 1) });
  });

  it.each(files)('%s resolves into the current reader schema of its record', (file) => {
    const name = file.split('.')[0] as RecordName;
    const writer = parse(JSON.parse(fs.readFileSync(path.join(HISTORY_DIR, file), 'utf8')));
    const reader = parse(loadSchema(name));
    expect(writer.name).toBe(`ingress.v1.${name}`);
    expect(fingerprint64(writer)).not.toBe(fingerprint64(reader));
    expect(() => reader.createResolver(writer)).not.toThrow();
    // And the codec knows it: a record of that writer, at its defaults, decodes.
    const codec = createAvroCodec();
    const sample = writer.random();
    const buf = Buffer.concat([Buffer.from([0xc3, 0x01]), fingerprint(writer), writer.toBuffer(sample)]);
    expect(() => codec.decode(name, buf)).not.toThrow();
  });

  /**
   * The current schemas' fingerprints, pinned. A change to a schema changes its fingerprint, and every reader
   * older than the change no longer knows the records the new writer writes (docs/records-and-topics.md#records).
   */
  const PINNED: Record<RecordName, string> = {
    Received: '991455b9aa25de6a',
    Decoded: 'c16377c2376a2f7b',
    ExecutionRequested: 'c5113479e5b89ade',
    DeadLetter: 'e100853ed77b4a16',
    Refused: 'fcfe4b1f2d1ded25',
    MdnDelivery: '77f3a1143db3aca5',
    MdnOutcome: '71974268fc2e9189',
  };

  it.each(RECORDS)('the current %s schema is the pinned one', (name) => {
    const actual = createAvroCodec().fingerprintOf(name).toString('hex');
    if (actual !== PINNED[name]) {
      const next = files.filter((f) => f.startsWith(`${name}.`)).length + 1;
      throw new Error(
        `schemas/${name}.avsc changed (fingerprint ${PINNED[name]} → ${actual}). Keep the schema as it was before the change as ` +
        `schemas/history/${name}.${next}.avsc (git show HEAD:schemas/${name}.avsc), so that records already written with it still ` +
        `decode; say in docs/records-and-topics.md what it lacks and in which order to upgrade; then pin ${actual} here.`,
      );
    }
  });
});
