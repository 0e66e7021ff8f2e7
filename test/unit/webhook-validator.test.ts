import { gzipSync } from 'node:zlib';
import { createWebhookTrigger, DEFAULT_WEBHOOK_LIMITS } from '../../services/triggers/webhook/webhook-trigger';
import type { InboundRequest } from '../../services/triggers/trigger';

/** The receiver-side check of compressed bodies holds each kind to the bound its decoder will hold it to. */
const trigger = createWebhookTrigger({ ...DEFAULT_WEBHOOK_LIMITS, maxInflatedBytes: 4 * 1024 * 1024, maxInMemoryBytes: 1024 * 1024 });
const request = (contentType: string): InboundRequest => ({
  requestId: 'r', workflowId: 'wf', pathSuffix: null, query: {}, remoteAddress: null, receivedAt: 0,
  headers: { 'content-type': contentType, 'content-encoding': 'gzip' },
});
const twoMiB = gzipSync(Buffer.from(JSON.stringify({ pad: 'x'.repeat(2 * 1024 * 1024) })));

async function verdict(contentType: string, options: Record<string, unknown> = {}) {
  const validator = trigger.validator!(request(contentType), { name: 'Hook', type: 'webhook', parameters: { options } })!;
  validator.write(twoMiB);
  return (await validator.end())?.status ?? null;
}

test('a JSON body is refused past the in-memory bound, since the decoder parses it whole', async () => {
  expect(await verdict('application/json')).toBe(413);
});

test('a body kept as a file may inflate up to the larger streaming bound', async () => {
  expect(await verdict('application/json', { rawBody: true })).toBeNull();
  expect(await verdict('application/octet-stream', { binaryData: true })).toBeNull();
});
