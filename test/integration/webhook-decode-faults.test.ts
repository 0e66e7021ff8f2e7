import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { deflateSync, gzipSync } from 'node:zlib';
import type { Received } from '../../services/platform/avro/records';
import { openFilesystemStore } from '../../services/platform/store/filesystem-store';
import { silentLogger } from '../../services/platform/logger/logger';
import { isBackendOutage } from '../../services/platform/log/dead-lettering';
import { IngressError } from '../../services/triggers/answers';
import { decodeWebhookBody } from '../../services/triggers/webhook/decode';
import { webhookParameters } from '../../services/triggers/webhook/parameters';
import { DEFAULT_WEBHOOK_LIMITS } from '../../services/triggers/webhook/webhook-trigger';

/**
 * The decoder's verdict on a body staged as a file through a real filesystem store: a body that fails as it
 * streams (a corrupt gzip stream) is the body's fault, a dead letter at once, never an outage the stage waits out
 * for ten minutes (dead-lettering.ts), although the store reports it as a failed write.
 */
test('a corrupt gzip body kept as a file (Raw Body) is a permanent payload-parse-error, not a store outage', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'decode-faults-'));
  try {
    const store = await openFilesystemStore(dir);
    const body = Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(64, 0x41)]);
    const received = { requestId: 'r-1', workflowId: 'wf-raw', receivedAt: Date.parse('2026-11-27T10:00:00Z'), contentType: 'application/json', headers: { 'content-encoding': 'gzip' }, body: { kind: 'inline', data: body } } as unknown as Received;
    const services = { store, logger: silentLogger, openBody: async () => Readable.from([body]), readBody: async () => body };
    const params = webhookParameters({ name: 'Hook', type: 'webhook', parameters: { options: { rawBody: true } } });
    const failure = await decodeWebhookBody(received, params, DEFAULT_WEBHOOK_LIMITS, services).then(() => null, (error: unknown) => error);
    expect(failure).toBeInstanceOf(IngressError);
    expect((failure as IngressError).code).toBe('payload-parse-error');
    expect(isBackendOutage(failure)).toBe(false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * The decoder holds a record that reached it without the receiver's checks (appended before they existed, or
 * under a higher MAX_INFLATION_RATIO) to the same bounds: a body over the ratio is payload-too-large, one with
 * bytes after its compressed stream payload-parse-error, as a file and in memory alike.
 */
test('the decoder refuses a body over the inflation ratio, and bytes after the compressed stream, as the receiver does', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'decode-faults-'));
  try {
    const store = await openFilesystemStore(dir);
    const decode = (body: Buffer, encoding: string, options: object) => {
      const received = { requestId: 'r-2', workflowId: 'wf-x', receivedAt: Date.parse('2026-11-27T10:00:00Z'), contentType: 'application/json', headers: { 'content-encoding': encoding }, body: { kind: 'inline', data: body } } as unknown as Received;
      const services = { store, logger: silentLogger, openBody: async () => Readable.from([body.subarray(0, 100), body.subarray(100)]), readBody: async () => body };
      const params = webhookParameters({ name: 'Hook', type: 'webhook', parameters: { options } });
      return decodeWebhookBody(received, params, DEFAULT_WEBHOOK_LIMITS, services).then(() => null, (error: unknown) => error as IngressError);
    };
    const bomb = gzipSync(Buffer.concat([Buffer.from('{"a":'), Buffer.alloc(8 * 1024 * 1024, 0x20), Buffer.from('1}')]));
    for (const options of [{}, { rawBody: true }]) {
      expect(await decode(bomb, 'gzip', options)).toMatchObject({ code: 'payload-too-large', message: expect.stringContaining('more than 100 times its compressed size') });
      expect(await decode(Buffer.concat([deflateSync('{"order":1}'), Buffer.from('{"order":2}')]), 'deflate', options)).toMatchObject({ code: 'payload-parse-error', message: expect.stringContaining('bytes after the end of its compressed stream') });
    }
    // What the receiver accepts, the decoder takes: a body that compresses as data does, past the first MiB.
    const hex = Buffer.from(JSON.stringify({ hex: randomBytes(700 * 1024).toString('hex') }));
    expect(await decode(gzipSync(hex), 'gzip', {})).toBeNull();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
