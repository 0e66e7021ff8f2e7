import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/**
 * An independent AS2 peer for tests: keys and certificates made by `openssl req`, messages signed and
 * encrypted by `openssl cms`, MDNs verified by `openssl cms -verify`. Nothing here uses the code under
 * test. (This OpenSSL build has no zlib, so compressed layers are built by `compressedData` below from
 * Node's zlib and a hand-written DER.) openssl runs asynchronously: Node 20's spawnSync can abort in
 * libuv (uv__epoll_ctl_prep) while the same process serves HTTP.
 */
export interface Party { name: string; cert: string; key: string; certPath: string; keyPath: string }

/** A message layer: its Content-Type, its body, and both as a MIME entity for the next layer. */
export interface Built { contentType: string; body: Buffer; entity: Buffer }

export interface Peer {
  dir: string;
  party(name: string): Promise<Party>;
  /** A self-signed key and certificate with these `openssl req` options (subject, serial…), not cached. */
  certificate(name: string, reqOptions: string[]): Promise<Party>;
  /** Bytes written to a file of the peer's directory: its path. */
  file(data: Buffer | string): string;
  /** A MIME entity (headers CRLF blank line body) written verbatim. */
  entity(headers: Record<string, string>, body: Buffer | string): Buffer;
  /** `openssl cms -sign -binary`: returns the HTTP Content-Type and body of the multipart/signed. */
  sign(entity: Buffer, signer: Party, digest?: string, extra?: string[]): Promise<Built>;
  /** `openssl cms -encrypt -binary -outform DER` to the recipient's certificate. */
  encrypt(entity: Buffer, recipient: Party, cipher?: string, extra?: string[]): Promise<Built>;
  compress(entity: Buffer): Built;
  /** Verify an MDN (HTTP content type + body) with `openssl cms -verify` against the signer's certificate; returns the signed content. */
  verifyMdn(contentType: string, body: Buffer, signer: Party): Promise<string>;
  digest(data: Buffer, algorithm: string): Promise<string>;
  cleanup(): void;
}

export function createPeer(): Peer {
  const dir = mkdtempSync(path.join(tmpdir(), 'as2-peer-'));
  let n = 0;
  const file = (data: Buffer | string) => { const p = path.join(dir, `f${n++}`); writeFileSync(p, data); return p; };
  const run = promisify(execFile);
  const openssl = async (args: string[]) => (await run('openssl', args, { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 })).stdout;
  const parties = new Map<string, Party>();
  const entity = (headers: Record<string, string>, body: Buffer | string) =>
    Buffer.concat([Buffer.from(Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n', 'latin1'), Buffer.from(body)]);
  /** openssl's S/MIME output: its top-level headers (one possibly folded Content-Type) and the body. */
  const splitSmime = (out: Buffer) => {
    const text = out.toString('latin1');
    const end = text.search(/\r?\n\r?\n/);
    const head = text.slice(0, end).replace(/\r?\n[ \t]+/g, ' ');
    const contentType = /^content-type:\s*(.*)$/im.exec(head)![1].trim();
    const bodyStart = end + (/^\r?\n\r?\n/.exec(text.slice(end))![0].length);
    return { contentType, body: out.subarray(bodyStart) };
  };
  const asEntity = (contentType: string, body: Buffer, cte?: string) => entity({ 'Content-Type': contentType, ...(cte ? { 'Content-Transfer-Encoding': cte } : {}) }, body);
  return {
    dir,
    async party(name) {
      let p = parties.get(name);
      if (!p) {
        const keyPath = path.join(dir, `${name}.key`);
        const certPath = path.join(dir, `${name}.crt`);
        await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '30', '-subj', `/CN=${name}/O=AS2 test`]);
        p = { name, keyPath, certPath, key: readFileSync(keyPath, 'utf8'), cert: readFileSync(certPath, 'utf8') };
        parties.set(name, p);
      }
      return p;
    },
    async certificate(name, reqOptions) {
      const keyPath = path.join(dir, `${name}.key`);
      const certPath = path.join(dir, `${name}.crt`);
      await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '30', ...reqOptions]);
      return { name, keyPath, certPath, key: readFileSync(keyPath, 'utf8'), cert: readFileSync(certPath, 'utf8') };
    },
    file,
    entity,
    async sign(content, signer, digest = 'sha256', extra = []) {
      const out = await openssl(['cms', '-sign', '-binary', '-in', file(content), '-signer', signer.certPath, '-inkey', signer.keyPath, '-md', digest, ...extra]);
      const { contentType, body } = splitSmime(out);
      return { contentType, body, entity: asEntity(contentType, body) };
    },
    async encrypt(content, recipient, cipher = '-aes256', extra = []) {
      const body = await openssl(['cms', '-encrypt', '-binary', '-in', file(content), '-outform', 'DER', cipher, '-recip', recipient.certPath, ...extra]);
      const contentType = 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"';
      return { contentType, body, entity: asEntity(contentType, body) };
    },
    compress(content) {
      const body = compressedData(content);
      const contentType = 'application/pkcs7-mime; smime-type=compressed-data; name="smime.p7z"';
      return { contentType, body, entity: asEntity(contentType, body) };
    },
    async verifyMdn(contentType, body, signer) {
      const mdn = file(Buffer.concat([Buffer.from(`Content-Type: ${contentType}\r\n\r\n`, 'latin1'), body]));
      return (await openssl(['cms', '-verify', '-in', mdn, '-CAfile', signer.certPath, '-purpose', 'any'])).toString('latin1');
    },
    async digest(data, algorithm) {
      return (await openssl(['dgst', `-${algorithm}`, '-binary', file(data)])).toString('base64');
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

// ---- RFC 5652 CompressedData with zlib (RFC 3274), for the OpenSSL builds without zlib ----
import { deflateSync } from 'node:zlib';

function der(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  const len = body.length < 128 ? Buffer.from([body.length]) : (() => { const b: number[] = []; for (let v = body.length; v > 0; v >>= 8) b.unshift(v & 0xff); return Buffer.from([0x80 | b.length, ...b]); })();
  return Buffer.concat([Buffer.from([tag]), len, body]);
}
const OID_COMPRESSED = Buffer.from('060b2a864886f70d0109100109', 'hex'); // 1.2.840.113549.1.9.16.1.9
const OID_ZLIB = Buffer.from('060b2a864886f70d0109100308', 'hex'); // 1.2.840.113549.1.9.16.3.8
const OID_DATA = Buffer.from('06092a864886f70d010701', 'hex');

export function compressedData(content: Buffer, deflated = deflateSync(content)): Buffer {
  const encap = der(0x30, OID_DATA, der(0xa0, der(0x04, deflated)));
  const cd = der(0x30, der(0x02, Buffer.from([0])), der(0x30, OID_ZLIB), encap);
  return der(0x30, OID_COMPRESSED, der(0xa0, cd));
}
