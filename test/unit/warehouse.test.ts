import { EnvelopeError, readWarehousePost, withDuplicateFlag } from '../../services/triggers/warehouse/envelope';

/** The warehouse post, read defensively and never rewritten (SPEC §2.4). */
const post = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

describe('reading a warehouse post', () => {
  test('Type selects dc or rc whatever its case; anything else selects nothing', () => {
    expect(readWarehousePost(post({ PostId: 'p1', Type: 'DC', Data: {} })).action).toBe('dc');
    expect(readWarehousePost(post({ PostId: 'p1', Type: ' rc ', Data: {} })).action).toBe('rc');
    expect(readWarehousePost(post({ PostId: 'p1', Type: 'ASN', Data: {} })).action).toBeNull();
    expect(readWarehousePost(post({ PostId: 'p1', Data: {} })).action).toBeNull();
    expect(readWarehousePost(post({ PostId: 'p1', Type: 7 })).type).toBeNull();
  });

  test('PostId as a string, as a number with every digit, or absent', () => {
    expect(readWarehousePost(post({ PostId: 'abc-1', Type: 'DC' })).postId).toBe('abc-1');
    expect(readWarehousePost(post('{"PostId": 123456789012345678901, "Type": "DC"}')).postId).toBe('123456789012345678901');
    expect(readWarehousePost(post({ Type: 'DC' })).postId).toBeNull();
    // The top-level PostId as JSON.parse keeps it: not a nested one, not the first of a repeated key.
    expect(readWarehousePost(post('{"Data":{"PostId":111},"PostId":222,"Type":"DC"}')).postId).toBe('222');
    expect(readWarehousePost(post('{"PostId":5,"PostId":6,"Type":"DC"}')).postId).toBe('6');
    // Above 2^53 too: a nested PostId whose digits round to the same double is not taken for the top-level one.
    expect(readWarehousePost(post('{"Data":{"PostId":18446744073709551617},"PostId":18446744073709551616,"Type":"DC"}')).postId).toBe('18446744073709551616');
    expect(readWarehousePost(post('{"PostId":18446744073709551617,"PostId":18446744073709551616,"Type":"DC"}')).postId).toBe('18446744073709551616');
    expect(readWarehousePost(post('{"Data":[{"PostId":1.8446744073709552e19}],"PostId":18446744073709551617e0,"Type":"DC"}')).postId).toBe('18446744073709551617e0');
    expect(readWarehousePost(post({ PostId: '', Type: 'DC' })).postId).toBeNull();
  });

  test('invalid JSON and JSON that is not an object are refused', () => {
    for (const bad of ['{"PostId": ', 'not json', '[1,2]', '"text"', 'null', '']) {
      expect(() => readWarehousePost(post(bad))).toThrow(EnvelopeError);
    }
  });

  test('a post that is not valid UTF-8 is refused, not read with U+FFFD in its place; valid UTF-8 (a BOM, CJK, emoji) is read as sent', () => {
    const latin1 = Buffer.from('{"PostId":"p1","Type":"DC","Data":{"Name":"Müller"}}', 'latin1');
    for (const bad of [latin1, Buffer.from([0x7b, 0x22, 0xc3, 0x22, 0x3a, 0x31, 0x7d]), Buffer.from([0x7b, 0x7d, 0xff]), Buffer.from([0x7b, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x3a, 0x31, 0x7d])]) {
      expect(() => readWarehousePost(bad)).toThrow('The request body is not valid UTF-8');
    }
    const good = '{"PostId":"倉庫-1","Type":"DC","Data":{"Name":"Müller 📦"}}';
    expect(readWarehousePost(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(good)]))).toMatchObject({ text: good, postId: '倉庫-1', action: 'dc' });
  });

  test('the output is the posted text with duplicate in front: zeros, blanks, nulls and big ids untouched', () => {
    const text = '\ufeff{ "PostId":"p9", "Type":"RC", "Data":{"ExpectedQty":null,"ReceivedQuantity":"","PalletQty":0,"SHIPMENT_LINE_ID":123456789012345678901,"Rate":1.50,"Items":[]}, "PostedAt":"2026-11-20T10:00:00Z" }';
    const read = readWarehousePost(post(text));
    const output = withDuplicateFlag(read, true);
    expect(output).toBe('{"duplicate":true, "PostId":"p9", "Type":"RC", "Data":{"ExpectedQty":null,"ReceivedQuantity":"","PalletQty":0,"SHIPMENT_LINE_ID":123456789012345678901,"Rate":1.50,"Items":[]}, "PostedAt":"2026-11-20T10:00:00Z" }');
    expect(JSON.parse(output)).toMatchObject({ duplicate: true, PostId: 'p9', Data: { ExpectedQty: null, ReceivedQuantity: '', PalletQty: 0 } });
    expect(withDuplicateFlag(readWarehousePost(post(' { } ')), false)).toBe('{"duplicate":false } ');
  });
});
