import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import type { Party } from './as2-peer';

/**
 * pyas2lib (PyPI, in infra/pyas2/.venv) as an independent AS2 partner, through test/support/pyas2_partner.py.
 * Everything runs asynchronously (execFile): Node 20's spawnSync/execFileSync can abort in libuv while the
 * same process serves HTTP.
 */
const ROOT = path.resolve(__dirname, '../..');
export const PYAS2_PYTHON = path.join(ROOT, 'infra/pyas2/.venv/bin/python');
export const PYAS2_PARTNER = path.join(__dirname, 'pyas2_partner.py');
const run = promisify(execFile);

/** Build (or check) the venv, as `npm test`'s pretest does; rejects loudly when it cannot. */
export async function ensurePyas2(): Promise<void> {
  try {
    await run(process.execPath, [path.join(ROOT, 'infra/pyas2/setup.js')], { timeout: 300_000 });
  } catch (e) {
    throw new Error(`pyas2lib partner unavailable (node infra/pyas2/setup.js): ${(e as { stderr?: string }).stderr || (e as Error).message}`);
  }
  if (!existsSync(PYAS2_PYTHON)) throw new Error(`${PYAS2_PYTHON} missing after infra/pyas2/setup.js`);
}

async function python(args: string[]): Promise<string> {
  try {
    return (await run(PYAS2_PYTHON, [PYAS2_PARTNER, ...args], { maxBuffer: 64 * 1024 * 1024, timeout: 60_000 })).stdout;
  } catch (e) {
    throw new Error(`pyas2_partner.py ${args[0]} failed: ${(e as { stderr?: string }).stderr || (e as Error).message}`);
  }
}

export interface Pyas2Options {
  sign?: boolean;
  digest?: 'sha1' | 'sha224' | 'sha256' | 'sha384' | 'sha512';
  encrypt?: 'tripledes_192_cbc' | 'aes_128_cbc' | 'aes_192_cbc' | 'aes_256_cbc';
  keyEnc?: 'rsaes_pkcs1v15' | 'rsaes_oaep';
  compress?: boolean;
  /** Digest of the signed MDN asked for, or 'none' for an unsigned MDN. */
  mdnDigest?: string;
  contentType?: string;
  filename?: string;
  subject?: string;
  /** Ask for an asynchronous MDN to this URL (Receipt-Delivery-Option). */
  asyncMdnUrl?: string;
}

export interface Pyas2Message {
  headers: Record<string, string>;
  body: Buffer;
  state: { message_id: string; mic: string | null; digest_alg: string | null; mdn_digest_alg: string | null };
  prefix: string;
}

export interface Pyas2MdnVerdict {
  status: string | null;
  detailed_status: string | null;
  original_message_found: boolean;
  original_recipient: string | null;
  signed: boolean;
  signature_verified: boolean;
  mic: string | null;
  mic_ok: boolean;
}

export function createPyas2(dir: string, partner: Party, receiver: Party, names = { partner: 'PARTNER', receiver: 'INGRESS' }) {
  let n = 0;
  return {
    /** pyas2lib's Message.build: the HTTP headers and body it would POST. */
    async build(payload: Buffer, o: Pyas2Options = {}, to: Party = receiver): Promise<Pyas2Message> {
      const prefix = path.join(dir, `py${n++}`);
      writeFileSync(`${prefix}.payload`, payload);
      const args = ['build', '--sender', names.partner, '--sender-key', partner.keyPath, '--sender-cert', partner.certPath,
        '--receiver', names.receiver, '--receiver-cert', to.certPath, '--payload', `${prefix}.payload`, '--out', prefix,
        '--digest', o.digest ?? 'sha256', '--mdn-digest', o.mdnDigest ?? 'sha256', '--content-type', o.contentType ?? 'application/edi-x12',
        '--key-enc', o.keyEnc ?? 'rsaes_pkcs1v15', '--subject', o.subject ?? 'PO 4711'];
      if (o.sign) args.push('--sign');
      if (o.encrypt) args.push('--encrypt', o.encrypt);
      if (o.compress) args.push('--compress');
      if (o.filename) args.push('--filename', o.filename);
      if (o.asyncMdnUrl) args.push('--mdn', 'async', '--mdn-url', o.asyncMdnUrl);
      const state = JSON.parse(await python(args));
      return { headers: JSON.parse(readFileSync(`${prefix}.headers.json`, 'utf8')), body: readFileSync(`${prefix}.body`), state, prefix };
    },
    /** pyas2lib's Mdn.parse over the MDN we answered, against the message it sent. */
    async parseMdn(message: Pyas2Message, headers: Headers, body: Buffer, signer: Party = receiver): Promise<Pyas2MdnVerdict> {
      writeFileSync(`${message.prefix}.mdn.headers.json`, JSON.stringify(Object.fromEntries(headers.entries())));
      writeFileSync(`${message.prefix}.mdn.body`, body);
      return JSON.parse(await python(['parse-mdn', '--sender', names.partner, '--sender-key', partner.keyPath, '--sender-cert', partner.certPath,
        '--receiver', names.receiver, '--receiver-cert', signer.certPath, '--state', `${message.prefix}.state.json`,
        '--headers', `${message.prefix}.mdn.headers.json`, '--body', `${message.prefix}.mdn.body`]));
    },
  };
}
