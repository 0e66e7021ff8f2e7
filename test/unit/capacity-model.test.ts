import { readFileSync } from 'node:fs';

/**
 * docs/capacity.md's tables are scripts/capacity-model.js's output from docs/benchmarks/sustained.json: a figure
 * changed without the page regenerated (`npm run capacity`) would leave the page saying what was not measured.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const model = require('../../scripts/capacity-model.js');

const figures = () => JSON.parse(readFileSync(model.FIGURES, 'utf8'));
const assumptions = Object.fromEntries(Object.entries(model.ASSUMPTIONS as Record<string, { value: number }>).map(([k, v]) => [k, v.value]));
const inputs = {
  embeddedSustained: 5000, embeddedCpuPerRequest: 300, receiverCpuPerRequest: 80, stagesCpuPerRequest: 200, brokerCpuPerRequest: 50,
  receiverProcessMax: 10_000, stageProcessRate: 4000, logBytesPerRequest: 4000, journalEntriesPerRequest: 3, inlineBodyMax: 262_144, workflowCacheMs: 2000,
};

describe('docs/capacity.md', () => {
  test('its tables are what the model makes of the committed figures', () => {
    const doc = readFileSync(model.DOC, 'utf8');
    expect(doc).toBe(model.withTables(doc, model.renderTables(figures())));
  });

  test('the committed figures say whether they are provisional, and where they come from', () => {
    const f = figures();
    expect(typeof f.provisional).toBe('boolean');
    expect(f.machine).toEqual(expect.objectContaining({ cores: expect.any(Number), node: expect.any(String), date: expect.any(String), command: expect.stringContaining('bench:sustained') }));
  });
});

describe('the capacity model', () => {
  test('processes are the rate over what one did, with headroom; cores are CPU per request times the rate', () => {
    const r = model.requirements(100_000, inputs, { ...assumptions, headroom: 0.5 });
    expect(r.receiverProcesses).toBe(20);
    expect(r.stageProcesses).toBe(50);
    expect(r.receiverCores).toBeCloseTo(16);
    expect(r.stageCores).toBeCloseTo(40);
  });

  test('each topic has a partition per stage process, or more when the bytes need them', () => {
    const few = model.requirements(10_000, inputs, { ...assumptions, headroom: 1, partitionBytesPerSecond: 1e9 });
    expect(few.partitions).toBe(few.stageProcesses);
    const bytes = model.requirements(10_000, { ...inputs, stageProcessRate: 1e9 }, { ...assumptions, headroom: 1, partitionBytesPerSecond: 1e6 });
    expect(bytes.partitions).toBe(14); // a third of 40 MB/s per topic, 1 MB/s a partition
  });

  test('brokers: at least the replication factor, and enough for the replicated bytes', () => {
    const a = { ...assumptions, headroom: 1, replicationFactor: 3, brokerBytesPerSecond: 100e6, partitionsPerBroker: 1e9 };
    expect(model.requirements(1000, inputs, a).brokers).toBe(3);
    expect(model.requirements(1_000_000, inputs, a).brokers).toBe(120);
  });

  test('registry reads follow processes and workflows, not the rate; journal writes follow the rate', () => {
    const a = { ...assumptions, headroom: 1, activeWorkflows: 10 };
    const low = model.requirements(100_000, inputs, a);
    const high = model.requirements(1_000_000, inputs, a);
    expect(low.registryReads).toBe(((low.receiverProcesses + low.stageProcesses) * 10 * 1000) / 2000);
    expect(high.journalWrites).toBe(3_000_000);
  });

  test('the one-process default is planned up to its sustained rate times the headroom', () => {
    const a = { ...assumptions, headroom: 0.5 };
    expect(model.requirements(2500, inputs, a).embeddedMachines).toBe(1);
    expect(model.requirements(2501, inputs, a).embeddedMachines).toBeNull();
  });

  test('walls come lowest first', () => {
    const at = model.walls(inputs).map((w: { at: number }) => w.at);
    expect(at).toEqual([...at].sort((x, y) => x - y));
  });

  test('the tables go between the markers and nowhere else', () => {
    const doc = `before\n${model.BEGIN}\nold\n${model.END}\nafter\n`;
    expect(model.withTables(doc, 'new')).toBe(`before\n${model.BEGIN}\nnew\n${model.END}\nafter\n`);
    expect(() => model.withTables('no markers', 'new')).toThrow(/markers/);
  });
});
