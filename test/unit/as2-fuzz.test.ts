import { oidOf, parseDer } from '../../services/triggers/as2/der';
import { oidContent } from '../../services/triggers/as2/der-writer';
import { identityOf, openingIdentityOf, type As2Identity } from '../../services/triggers/as2/certificates';
import { AS2_FAULTS, As2Fault, MAX_DETAIL_CHARS } from '../../services/triggers/as2/faults';
import { decodedBody, filenameOf, multipartParts, parseEntity, parseMediaType } from '../../services/triggers/as2/mime';
import { unwrapMessage } from '../../services/triggers/as2/unwrap';
import { createPeer, type Party, type Peer } from '../support/as2-peer';
import { envelope, mutateDer, mutateMime } from '../support/fuzz-as2';
import { caseSeed, prng, type Rng } from '../support/prng';

/**
 * Seeded property tests of the AS2 opening (unwrap.ts and below: MIME, the DER reader, CMS enveloped, signed
 * and compressed data). Valid messages built by `openssl cms` are damaged at every layer — DER lengths, tags,
 * OIDs, nesting, truncation, MIME boundaries, headers and transfer encodings, bytes — and sealed again in
 * process when the damage is inside the encryption. The promise: every message settles, refused with an
 * As2Fault of the one table (never another error, which would be answered with a vague text, or inside
 * encryption logged as `unexpected error`), or opened; and one the receiver opened opens again in the decoder.
 *
 * FUZZ_CASES=20000 (and FUZZ_SEED=n) run more cases; a failure names the seed and case to replay with FUZZ_CASE.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 20261128);
const CASES = Number(process.env.FUZZ_CASES ?? 400);
const ONLY_CASE = process.env.FUZZ_CASE === undefined ? null : Number(process.env.FUZZ_CASE);
const CASE_TIMEOUT_MS = 5_000;
const MAX_INFLATED = 1024 * 1024;

let peer: Peer;
let receiver: Party;
let partner: Party;
let pinned: As2Identity;
let unpinned: As2Identity;
let decoderIdentity: As2Identity;
/** The layers of valid messages, to damage. */
let base: {
  payload: Buffer;
  /** RFC 6362: two attachments, base64 and quoted-printable. */
  mixed: Buffer;
  signed: { contentType: string; body: Buffer; entity: Buffer; boundary: string; signature: Buffer };
  compressed: { contentType: string; body: Buffer; entity: Buffer };
  enveloped: Buffer[];
};

beforeAll(async () => {
  peer = createPeer();
  [receiver, partner] = [await peer.party('receiver'), await peer.party('partner')];
  const data = { certificate: receiver.cert, privateKey: receiver.key, partnerCertificate: partner.cert };
  pinned = identityOf(data);
  unpinned = identityOf({ certificate: receiver.cert, privateKey: receiver.key });
  decoderIdentity = { ...openingIdentityOf(data), pinned: false };
  const payload = peer.entity({ 'Content-Type': 'application/edi-x12', 'Content-Disposition': 'attachment; filename="po.x12"' }, 'ISA*00*          *00*~GS*PO~ST*850*0001~');
  const signed = await peer.sign(payload, partner);
  const boundary = parseMediaType(signed.contentType).params.boundary;
  const signature = decodedBody(parseEntity(multipartParts(signed.body, boundary)[1]));
  const compressed = peer.compress(signed.entity);
  const enveloped = [
    (await peer.encrypt(signed.entity, receiver, '-aes128')).body,
    (await peer.encrypt(signed.entity, receiver, '-aes-256-gcm')).body,
    (await peer.encrypt(compressed.entity, receiver, '-aes256', ['-keyopt', 'rsa_padding_mode:oaep'])).body,
  ];
  const mixed = peer.entity({ 'Content-Type': 'multipart/mixed; boundary="mix-1"' }, [
    '--mix-1', 'Content-Type: application/edi-x12', 'Content-Transfer-Encoding: base64', 'Content-Disposition: attachment; filename="a.x12"', '', Buffer.from('ISA*00*~GS*PO~').toString('base64'),
    '--mix-1', 'Content-Type: text/plain', 'Content-Transfer-Encoding: quoted-printable', 'Content-Disposition: attachment; filename*=UTF-8\'\'b%C3%A9.txt', '', 'caf=C3=A9 =\r\nline', '--mix-1--', '',
  ].join('\r\n'));
  base = { payload, mixed, signed: { ...signed, boundary, signature }, compressed, enveloped };
}, 60_000);
afterAll(() => peer?.cleanup());

interface Case { what: string; body: Buffer; contentType: string | null; transferEncoding: string | null; multipleAttachments?: boolean }

const ENVELOPED = 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"';
const COMPRESSED = 'application/pkcs7-mime; smime-type=compressed-data; name="smime.p7z"';

/** A MIME entity's header block and body, split where parseEntity would; null when it has none. */
function topOf(entity: Buffer): { contentType: string | null; transferEncoding: string | null; body: Buffer } {
  const e = parseEntity(entity);
  return { contentType: e.headers['content-type'] ?? null, transferEncoding: e.headers['content-transfer-encoding'] ?? null, body: e.body };
}

const b64 = (der: Buffer, rng: Rng) => der.toString('base64').replace(new RegExp(`.{1,${rng.pick([64, 76, 1000])}}`, 'g'), '$&\r\n');

/** The multipart/signed entity with its signature part's DER replaced. */
function withSignature(signature: Buffer, rng: Rng): Buffer {
  const { boundary } = base.signed;
  const parts = multipartParts(base.signed.body, boundary);
  const sigHead = parts[1].subarray(0, parts[1].indexOf('\r\n\r\n') + 4);
  const body = Buffer.concat([Buffer.from(`--${boundary}\r\n`), parts[0], Buffer.from(`\r\n--${boundary}\r\n`), sigHead, Buffer.from(b64(signature, rng)), Buffer.from(`\r\n--${boundary}--\r\n`)]);
  return Buffer.concat([Buffer.from(`Content-Type: ${base.signed.contentType}\r\n\r\n`), body]);
}

/** One damaged message: its layer, its damage, whether it travels encrypted. */
function makeCase(rng: Rng): Case {
  const seal = rng.chance(0.4);
  const asEntity = (contentType: string, body: Buffer, cte?: string) => Buffer.concat([Buffer.from(`Content-Type: ${contentType}\r\n${cte ? `Content-Transfer-Encoding: ${cte}\r\n` : ''}\r\n`), body]);
  let entity: Buffer;
  let what: string;
  const layer = rng.int(0, 6);
  if (layer === 0) {
    // The envelope itself (openssl's), sent as the HTTP body.
    const m = mutateDer(rng, rng.pick(base.enveloped));
    return { what: `envelope DER: ${m.what}`, body: m.bytes, contentType: ENVELOPED, transferEncoding: null };
  } else if (layer === 1) {
    const m = mutateDer(rng, base.signed.signature);
    entity = withSignature(m.bytes, rng);
    what = `signature DER: ${m.what}`;
  } else if (layer === 2) {
    const m = mutateDer(rng, base.compressed.body);
    const cte = rng.chance(0.3) ? 'base64' : undefined;
    entity = asEntity(COMPRESSED, cte ? Buffer.from(b64(m.bytes, rng)) : m.bytes, cte);
    what = `compressed DER: ${m.what}`;
  } else if (layer === 3) {
    const m = mutateMime(rng, base.signed.entity, base.signed.boundary);
    entity = m.bytes;
    what = `signed MIME: ${m.what}`;
  } else if (layer === 4) {
    // The payload, unsigned: opened (and decoded again) when no partner is pinned.
    const mixed = rng.chance(0.4);
    const m = mixed ? mutateMime(rng, base.mixed, 'mix-1') : mutateMime(rng, base.payload, null);
    entity = m.bytes;
    what = `payload MIME${mixed ? ' (multiple attachments)' : ''}: ${m.what}`;
    if (mixed) return { ...topOrRaw(entity, what), multipleAttachments: true };
  } else if (layer === 5) {
    // A compressed layer around damaged MIME.
    const m = mutateMime(rng, rng.chance(0.5) ? base.signed.entity : base.payload, null);
    entity = asEntity(COMPRESSED, peer.compress(m.bytes).body);
    what = `compressed around MIME: ${m.what}`;
  } else {
    // Several layers: sealed twice, or compressed inside a signature's content.
    const inner = rng.chance(0.5) ? base.compressed.entity : asEntity(ENVELOPED, envelope(base.signed.entity, receiver.cert));
    const m = mutateMime(rng, inner, null);
    entity = m.bytes;
    what = `nested layers: ${m.what}`;
  }
  if (seal) {
    return { what: `sealed ${what}`, body: envelope(entity, receiver.cert), contentType: ENVELOPED, transferEncoding: rng.chance(0.1) ? 'binary' : null };
  }
  return topOrRaw(entity, what);
}

function topOrRaw(entity: Buffer, what: string): Case {
  try {
    return { what, ...topOf(entity) };
  } catch {
    // No header block at all: sent as it is, under the base message's content type.
    return { what: `${what} (no headers)`, body: entity, contentType: base.signed.contentType, transferEncoding: null };
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout;
  return Promise.race([promise, new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), ms); })]).finally(() => clearTimeout(timer));
}

/** Why an outcome breaks the promise, or null. */
async function judge(c: Case, identity: As2Identity): Promise<{ outcome: string; problem: string | null }> {
  const multipleAttachments = c.multipleAttachments ?? false;
  const options = { identity, maxInflatedBytes: MAX_INFLATED, multipleAttachments };
  let result;
  try {
    result = await withTimeout(unwrapMessage(c.body, c.contentType, c.transferEncoding, options), CASE_TIMEOUT_MS);
  } catch (error) {
    if (!(error instanceof As2Fault)) return { outcome: 'thrown', problem: `not an As2Fault: ${(error as Error)?.stack ?? String(error)}` };
    if (!(error.code in AS2_FAULTS)) return { outcome: error.code, problem: `fault ${error.code} is not in the table` };
    if (error.message.length > MAX_DETAIL_CHARS) return { outcome: error.code, problem: 'detail too long' };
    // Inside encryption the real reason is logged; an error of no fault there is a crash the partner cannot see.
    if (error.reason === 'unexpected error') return { outcome: error.code, problem: 'an unexpected (non-fault) error inside the encryption' };
    if (error.code === 'not-accepted') return { outcome: error.code, problem: 'not-accepted with no memory budget in play' };
    return { outcome: error.code, problem: null };
  }
  if (result === 'timeout') return { outcome: 'timeout', problem: `did not settle within ${CASE_TIMEOUT_MS} ms` };
  // Accepted: the decoder must open it again, and its attachments must name a file and decode.
  try {
    const again = await unwrapMessage(c.body, c.contentType, c.transferEncoding, { identity: decoderIdentity, maxInflatedBytes: MAX_INFLATED, allowMd5: true, multipleAttachments, receivedAt: Date.now() });
    for (const a of again.attachments) { filenameOf(a.entity); parseMediaType(a.entity.headers['content-type']); }
    if (again.attachments.length !== result.attachments.length) return { outcome: 'opened', problem: 'the decoder found other attachments' };
    if (!again.attachments.every((a, i) => a.bytes.equals(result.attachments[i].bytes))) return { outcome: 'opened', problem: 'the decoder decoded other bytes' };
  } catch (error) {
    return { outcome: 'opened', problem: `accepted, but the decoder cannot open it: ${error instanceof As2Fault ? `${error.code} ${error.reason ?? error.message}` : (error as Error).stack}` };
  }
  return { outcome: 'opened', problem: null };
}

test(`${CASES} damaged AS2 messages: each refused with a fault of the table, or opened and opened again by the decoder (seed ${SEED})`, async () => {
  const outcomes = new Map<string, number>();
  const problems: string[] = [];
  // Memory: what stays held once a case settled (after a collection, when `node --expose-gc` runs jest).
  const gc = (globalThis as { gc?: () => void }).gc;
  const held = () => { gc?.(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
  const heldBefore = held();
  for (let n = 0; n < CASES; n++) {
    if (ONLY_CASE !== null && n !== ONLY_CASE) continue;
    const rng = prng(caseSeed(SEED, n));
    const c = makeCase(rng);
    const identity = rng.chance(0.5) ? pinned : unpinned;
    const { outcome, problem } = await judge(c, identity);
    outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    if (problem) problems.push(`FUZZ_SEED=${SEED} FUZZ_CASE=${n} (${c.what}; ${identity === pinned ? 'pinned' : 'unpinned'}): ${problem}`);
    if (problem && process.env.FUZZ_VERBOSE) console.log(problems[problems.length - 1]);
    if (problems.length >= 5) break;
  }
  // A length field saying 2^32 must not make anything of that size, and nothing may stay behind a case:
  // 64 MiB is far above what the cases hold (without a collection, garbage not yet collected counts too).
  const grown = held() - heldBefore;
  if (process.env.FUZZ_VERBOSE) console.log(`held ${Math.round(grown / 1024 / 1024)} MiB more after ${CASES} cases`);
  if (gc) expect(grown).toBeLessThan(64 * 1024 * 1024);
  expect(problems).toEqual([]);
  if (ONLY_CASE === null && CASES >= 200) {
    // The damage must reach both answers and several faults, or the run proves little.
    expect(outcomes.get('opened') ?? 0).toBeGreaterThan(0);
    expect([...outcomes.keys()].filter((k) => k !== 'opened').length).toBeGreaterThanOrEqual(4);
  }
  if (process.env.FUZZ_VERBOSE) console.log(Object.fromEntries(outcomes));
}, 60_000 + CASES * 50);

test(`object identifiers: read only when they are the one encoding of what is read (seed ${SEED})`, () => {
  // An OID read loosely can name another one (a cut `… 01 07 01 80` read as id-data): whatever oidOf accepts must
  // re-encode (der-writer.ts) to exactly its bytes, and whatever it refuses is a malformed-message fault.
  const real = ['1.2.840.113549.1.7.1', '1.2.840.113549.1.9.16.1.9', '2.16.840.1.101.3.4.1.2', '2.25.340282366920938463463374607431768211455', '0.0', '2.999.3'].map(oidContent);
  let read = 0;
  const wrong: string[] = [];
  for (let n = 0; n < CASES * 5; n++) {
    const rng = prng(caseSeed(SEED, n));
    let bytes = Buffer.from(rng.pick(real));
    for (let k = rng.int(0, 3); k > 0; k--) {
      const at = rng.int(0, bytes.length);
      const byte = rng.pick([0x80, 0x81, 0xff, 0x7f, 0x00, 0x01, rng.int(0, 255)]);
      bytes = rng.pick([
        () => Buffer.concat([bytes.subarray(0, at), Buffer.from([byte]), bytes.subarray(at)]),
        () => Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]),
        () => Buffer.concat([bytes.subarray(0, at), Buffer.from([byte]), bytes.subarray(at + 1)]),
      ])();
    }
    if (bytes.length === 0 || bytes.length > 64) continue;
    const encoded = Buffer.concat([Buffer.from([0x06, bytes.length]), bytes]);
    let id: string;
    try {
      id = oidOf(parseDer(encoded));
    } catch (error) {
      if (!(error instanceof As2Fault && error.code === 'malformed-message')) wrong.push(`${bytes.toString('hex')}: ${(error as Error).message}`);
      continue;
    }
    read++;
    if (!oidContent(id).equals(bytes)) wrong.push(`${bytes.toString('hex')} read as ${id}`);
  }
  expect(wrong).toEqual([]);
  expect(read).toBeGreaterThan(CASES / 2);
});
