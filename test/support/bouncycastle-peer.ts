import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Built, Party } from './as2-peer';

/**
 * A BouncyCastle sender (infra/bouncycastle/GcmMessage.java, run on the machine's Java against the jars
 * that `npm test`'s pretest fetched): AES-GCM inside a plain EnvelopedData, tag appended, exactly as
 * the Java AS2 products (phase2/as2-lib, OpenAS2, Mendelson) send it. No fallback: when the peer
 * cannot be had, ensureBouncyCastle throws with the reason and the tests that need it fail.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { ensureBouncyCastle } = require('../../infra/bouncycastle/fetch.js') as { ensureBouncyCastle(): { classpath: string; version: string } };

export type BcCipher = 'AES128_GCM' | 'AES192_GCM' | 'AES256_GCM';
export type BcMode = 'stream' | 'buffered';

export interface BouncyCastlePeer {
  version: string;
  /** `entity` encrypted to `recipient` by BouncyCastle; the body is the BER ContentInfo. */
  encrypt(entity: Buffer, recipient: Party, cipher: BcCipher, mode?: BcMode): Promise<Built>;
}

export function bouncyCastlePeer(): BouncyCastlePeer {
  const { classpath, version } = ensureBouncyCastle();
  const run = promisify(execFile);
  return {
    version,
    async encrypt(entity, recipient, cipher, mode = 'stream') {
      const child = run('java', ['-cp', classpath, 'GcmMessage', cipher, recipient.certPath, mode], { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
      child.child.stdin!.end(entity);
      const { stdout: body } = await child;
      if (body.length === 0) throw new Error(`GcmMessage ${cipher} ${mode} wrote nothing`);
      const contentType = 'application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"';
      return { contentType, body, entity: Buffer.concat([Buffer.from(`Content-Type: ${contentType}\r\nContent-Transfer-Encoding: binary\r\n\r\n`, 'latin1'), body]) };
    },
  };
}
