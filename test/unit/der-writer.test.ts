import forge from 'node-forge';
import { CONTENT_CIPHERS, DIGEST_OIDS, OID, OID_OF_DIGEST } from '../../services/triggers/as2/algorithms';
import { oidOf, parseDer } from '../../services/triggers/as2/der';
import { oid, oidContent } from '../../services/triggers/as2/der-writer';
import { ECDSA_WITH } from '../../services/triggers/as2/sign';

/** node-forge (a devDependency only) as the reference encoder: production encodes its constant OIDs itself. */
const forgeOid = (id: string) => Buffer.from(forge.asn1.oidToDer(id).getBytes(), 'binary');

const CONSTANTS = [...new Set([
  ...Object.values(OID), ...Object.values(OID_OF_DIGEST), ...Object.keys(DIGEST_OIDS), ...Object.values(ECDSA_WITH), ...Object.keys(CONTENT_CIPHERS),
])];

describe('OBJECT IDENTIFIER encoding', () => {
  it.each(CONSTANTS)('encodes %s as node-forge does, and reads back', (id) => {
    expect(oidContent(id).toString('hex')).toBe(forgeOid(id).toString('hex'));
    expect(oidOf(parseDer(oid(id)))).toBe(id);
  });

  it.each(['0.0', '0.39', '1.0', '1.39', '2.0', '2.39', '2.40', '2.999', '2.999.3', '1.2.127', '1.2.128', '1.2.16383', '1.2.16384', '1.2.4294967295'])(
    'encodes the edge case %s as node-forge does', (id) => {
      expect(oidContent(id).toString('hex')).toBe(forgeOid(id).toString('hex'));
    },
  );

  it('encodes the example of X.690 §8.19.5 (a first arc pair above 127; node-forge before 1.4 got it wrong)', () => {
    expect(oidContent('2.999.3').toString('hex')).toBe('883703');
  });

  it('encodes arcs beyond 32 bits (where node-forge cannot) and reads them back', () => {
    expect(oidContent('2.25.340282366920938463463374607431768211455').toString('hex')).toBe(`6983${'ff'.repeat(17)}7f`);
    expect(oidOf(parseDer(oid('1.2.9007199254740991')))).toBe('1.2.9007199254740991');
    expect(oidOf(parseDer(oid('2.25.340282366920938463463374607431768211455')))).toBe('2.25.340282366920938463463374607431768211455');
  });

  it.each([
    ['id-data with a cut subidentifier after it', '060a2a864886f70d01070180'],
    ['id-data with a subidentifier padded with 0x80', '060a2a80864886f70d010701'],
    ['a first subidentifier padded with 0x80', '0603800102'],
    ['one byte that continues', '060188'],
  ])('refuses %s as malformed rather than reading some other OID', (_name, hex) => {
    expect(() => oidOf(parseDer(Buffer.from(hex, 'hex')))).toThrow(/malformed \(OBJECT IDENTIFIER/);
  });

  it.each(['', '1', '3.1', '1.40', '0.40', '1.2.', '1..2', '1.02', '1.2.-3', '1.2.x', ' 1.2'])('refuses %j', (id) => {
    expect(() => oidContent(id)).toThrow('not an object identifier');
  });
});
