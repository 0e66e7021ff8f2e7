import { randomUUID } from 'node:crypto';
import { ConfigResourceTypes, Kafka, logLevel } from 'kafkajs';
import { backendEnv } from '../support/app';
import { runCli } from '../support/cli-process';
import { requireTestEnv, TEST_ENV } from '../support/servers';

/** `ingress topics apply` against the real broker, and `ingress start` refusing to run without it. */
let env: Record<string, string>;
let cleanup: () => void;
let prefix: string;
beforeAll(() => {
  prefix = `tp${randomUUID().slice(0, 8)}.`;
  ({ env, cleanup } = backendEnv('embedded', {
    KAFKA_BROKERS: requireTestEnv(TEST_ENV.kafkaBrokers), INGRESS_TOPIC_PREFIX: prefix, KAFKA_TOPIC_PARTITIONS: '2',
    EXECUTION_QUEUE_WAREHOUSE: 'executions.requested.warehouse.v1', KAFKA_RETENTION_HOURS: '48',
  }));
});
afterAll(() => cleanup());

const lines = (text: string) => text.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));

test('start on Kafka refuses to run before the topics exist, and names the command that creates them', async () => {
  const res = await runCli(['start', '--services', 'decoder'], env);
  expect(res.code).toBe(1);
  expect(res.stderr).toContain(`topic(s) ${prefix}ingress.received.v1`);
  expect(res.stderr).toContain('`ingress topics apply`');
});

test('topics apply creates every pipeline topic, per-kind queues included, with the documented settings; a rerun changes nothing', async () => {
  const first = await runCli(['topics', 'apply'], env);
  expect(first.code).toBe(0);
  // One broker: the default replication factor 3 is capped, with a warning, and min.insync.replicas with it.
  expect(first.stderr).toMatch(/warning: replication factor 3 capped to 1/);
  const created = lines(first.stdout);
  expect(created.map((r) => r.topic).sort()).toEqual([
    `${prefix}executions.requested.v1`, `${prefix}executions.requested.warehouse.v1`,
    `${prefix}ingress.dead-letter.v1`, `${prefix}ingress.decoded.v1`,
    `${prefix}ingress.mdn-deliveries.v1`, `${prefix}ingress.mdn-outcomes.v1`, `${prefix}ingress.mdn-retry-1.v1`, `${prefix}ingress.mdn-retry-2.v1`, `${prefix}ingress.mdn-retry-3.v1`,
    `${prefix}ingress.received.v1`, `${prefix}ingress.refused.v1`,
  ]);
  expect(created.every((r) => r.action === 'created' && r.partitions === 2 && r.replicationFactor === 1)).toBe(true);

  const admin = new Kafka({ brokers: env.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const configs = async (topic: string) => Object.fromEntries((await admin.describeConfigs({
      includeSynonyms: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'min.insync.replicas', 'message.timestamp.type'] }],
    })).resources[0].configEntries.map((e) => [e.configName, e.configValue]));
    expect(await configs(`${prefix}ingress.received.v1`)).toEqual({ 'retention.ms': String(48 * 3_600_000), 'min.insync.replicas': '1', 'message.timestamp.type': 'LogAppendTime' });
    expect((await configs(`${prefix}ingress.dead-letter.v1`))['retention.ms']).toBe(String(720 * 3_600_000));

    const again = await runCli(['topics', 'apply'], env);
    expect(lines(again.stdout).map((r) => r.action)).toEqual(Array(11).fill('unchanged'));

    const changed = await runCli(['topics', 'apply'], { ...env, KAFKA_RETENTION_HOURS: '0', KAFKA_TOPIC_PARTITIONS: '3' });
    expect(changed.code).toBe(0);
    expect(changed.stderr).toMatch(/partitions raised from 2 to 3/);
    expect(lines(changed.stdout).find((r) => r.topic === `${prefix}ingress.received.v1`)).toMatchObject({ action: 'updated', partitions: 3 });
    expect((await configs(`${prefix}ingress.received.v1`))['retention.ms']).toBe('-1');
  } finally {
    await admin.disconnect();
  }

  // With the topics there, start comes up (and stops on SIGTERM); see cli.test.ts for the embedded log.
  const start = await runCli(['start', '--services', 'dispatcher'], { ...env, PORT: '0' }, undefined, 'ingress started');
  expect({ code: start.code, stderr: start.stderr }).toEqual({ code: 0, stderr: '' });
  expect(start.stdout).toContain('"stopped"');
}, 90_000);

test('topic settings are validated like every other variable', async () => {
  const res = await runCli(['topics', 'apply'], { ...env, KAFKA_REPLICATION_FACTOR: '2', KAFKA_MIN_INSYNC_REPLICAS: '3', KAFKA_TOPIC_PARTITIONS: '0' });
  expect(res.code).toBe(78);
  expect(res.stderr).toContain('KAFKA_MIN_INSYNC_REPLICAS=3: at most KAFKA_REPLICATION_FACTOR (2)');
  expect(res.stderr).toContain('KAFKA_TOPIC_PARTITIONS="0": partitions of each pipeline topic');
});
