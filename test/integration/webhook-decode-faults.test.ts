import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Readable } from 'node:stream';
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
    const received = { requestId: 'r-1', workflowId: 'wf-raw', receivedAt: Date.parse('2026-11-27T10:00:00Z'), contentType: 'application/json', headers: { 'content-encoding': 'gzip' } } as unknown as Received;
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
