/**
 * The servers started by test/support/global-setup.ts are reachable from a jest worker and behave
 * like the real thing for the operations the app uses.
 */
import { randomUUID } from 'crypto';
import { Kafka, logLevel } from 'kafkajs';
import { BlobServiceClient } from '@azure/storage-blob';
import { CosmosClient } from '@azure/cosmos';
import { createTopicsAndWait } from '../../services/platform/log/kafka/topic-admin';
import { cosmosClientOptionsFromEnv, requireTestEnv, TEST_ENV } from '../support/servers';

describe('test servers', () => {
  it('publishes only TEST_* addresses (never the app-facing names)', () => {
    expect(requireTestEnv(TEST_ENV.kafkaBrokers)).toMatch(/^[^\s,]+:\d+$/);
    expect(requireTestEnv(TEST_ENV.azureStorageConnectionString)).toContain('AccountName=');
    expect(requireTestEnv(TEST_ENV.cosmosEndpoint)).toMatch(/^https?:\/\//);
    expect(requireTestEnv(TEST_ENV.cosmosKey).length).toBeGreaterThan(0);
    expect(process.env[TEST_ENV.cosmosCa]).toBeDefined();
  });

  it('kafka: creates a topic, produces and consumes a message', async () => {
    const kafka = new Kafka({
      clientId: 'servers-test',
      brokers: requireTestEnv(TEST_ENV.kafkaBrokers).split(','),
      logLevel: logLevel.NOTHING,
    });
    const topic = `servers-test-${randomUUID()}`;
    const admin = kafka.admin();
    const producer = kafka.producer();
    const consumer = kafka.consumer({ groupId: `servers-test-${randomUUID()}` });
    try {
      await admin.connect();
      await createTopicsAndWait(admin, [{ topic, numPartitions: 2 }]); // the service's own wait (kafkajs's can fail on KRaft)
      expect(await admin.listTopics()).toContain(topic);
      const meta = await admin.fetchTopicMetadata({ topics: [topic] });
      expect(meta.topics[0].partitions).toHaveLength(2);

      const key = randomUUID();
      await producer.connect();
      const [sent] = await producer.send({ topic, messages: [{ key, value: 'hello kafka', headers: { h: 'v' } }] });
      expect(sent.errorCode).toBe(0);

      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const received = await new Promise<{ key: string; value: string; header: string; partition: number }>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no message consumed within 30s')), 30_000);
        consumer
          .run({
            eachMessage: async ({ message, partition }) => {
              clearTimeout(timer);
              resolve({
                key: message.key!.toString(),
                value: message.value!.toString(),
                header: String(message.headers?.h),
                partition,
              });
            },
          })
          .catch(reject);
      });
      expect(received).toEqual({ key, value: 'hello kafka', header: 'v', partition: sent.partition });

      const offsets = await admin.fetchTopicOffsets(topic);
      expect(offsets.reduce((n, p) => n + Number(p.high), 0)).toBe(1);
    } finally {
      await consumer.disconnect().catch(() => {});
      await producer.disconnect().catch(() => {});
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect().catch(() => {});
    }
  });

  it('azurite: creates a container, uploads and downloads a blob', async () => {
    const service = BlobServiceClient.fromConnectionString(requireTestEnv(TEST_ENV.azureStorageConnectionString));
    const container = service.getContainerClient(`servers-test-${randomUUID()}`);
    await container.create();
    try {
      const body = Buffer.from(`payload ${randomUUID()} ✓`, 'utf8');
      const blob = container.getBlockBlobClient('dir/hello.txt');
      await blob.uploadData(body, { blobHTTPHeaders: { blobContentType: 'text/plain; charset=utf-8' }, metadata: { origin: 'test' } });

      const downloaded = await blob.downloadToBuffer();
      expect(downloaded.equals(body)).toBe(true);
      const props = await blob.getProperties();
      expect(props.contentLength).toBe(body.length);
      expect(props.contentType).toBe('text/plain; charset=utf-8');
      expect(props.metadata).toEqual({ origin: 'test' });

      const names: string[] = [];
      for await (const b of container.listBlobsFlat()) names.push(b.name);
      expect(names).toEqual(['dir/hello.txt']);
    } finally {
      await container.deleteIfExists();
    }
  });

  it('cosmos: creates a database and container, upserts, reads and queries an item', async () => {
    const client = new CosmosClient(cosmosClientOptionsFromEnv());
    const dbId = `servers-test-${randomUUID()}`;
    try {
      const { database } = await client.databases.createIfNotExists({ id: dbId });
      const { container } = await database.containers.createIfNotExists({ id: 'items', partitionKey: { paths: ['/id'] } });
      const id = randomUUID();

      const { resource: created } = await container.items.upsert({ id, status: 'accepted', n: 1 });
      expect(created).toMatchObject({ id, status: 'accepted', n: 1 });
      await container.items.upsert({ id, status: 'done', n: 2 });

      const { resource: read, statusCode } = await container.item(id, id).read<{ id: string; status: string; n: number }>();
      expect(statusCode).toBe(200);
      expect(read).toMatchObject({ id, status: 'done', n: 2 });

      const { resources } = await container.items
        .query<{ id: string; n: number }>({ query: 'SELECT c.id, c.n FROM c WHERE c.status = @s', parameters: [{ name: '@s', value: 'done' }] })
        .fetchAll();
      expect(resources).toEqual([{ id, n: 2 }]);

      const missing = await container.item('nope', 'nope').read();
      expect(missing.statusCode).toBe(404);
    } finally {
      await client.database(dbId).delete().catch(() => {});
      client.dispose();
    }
  });
});
