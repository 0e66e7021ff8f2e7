/**
 * OffsetFetch version 7 for kafkajs, so that a stage can read a partition's committed offset **stable**
 * (`require_stable`, KIP-447): the group coordinator answers UNSTABLE_OFFSET_COMMIT for a partition while a
 * transactional offset commit for it is pending, instead of the last offset that was stable. kafkajs 2.2.4
 * implements OffsetFetch up to version 4 only, and no maintained release adds more; this module adds version 7
 * to its table of request versions.
 *
 * Why it matters (docs/kafka.md, "Exactly once"): a stage that takes a partition over reads the group's
 * committed offset. A transaction commits its offsets when its markers are written, which the transaction
 * coordinator does after it answered EndTxn; after a broker restart that can take seconds. A read in that
 * window returned the offset from before the transaction, and the stage moved back and handled the
 * transaction's records a second time (seen in test/e2e/lifecycle.test.ts: "kafka stage moves to the committed
 * offset", from 70 to 48, then 22 executions twice).
 *
 * Only reads made inside `stableCommittedOffset` ask for stable offsets (an AsyncLocalStorage flag, since
 * kafkajs gives a request no other way in). Every other OffsetFetch of the process (kafkajs's consumers at a
 * join, lag reads) goes out as version 7 without the flag, which answers as version 4 did: a consumer that
 * got UNSTABLE_OFFSET_COMMIT at a join would stop heartbeating while kafkajs retries, and the stage's own
 * stable read corrects where kafkajs starts fetching anyway.
 *
 * Written here rather than taken from a library because kafkajs is the client (DESIGN.md §3) and has no
 * extension point for request versions; the encoding follows Kafka's OffsetFetchRequest.json and
 * OffsetFetchResponse.json (version 6 is the first flexible one, version 7 adds RequireStable) with kafkajs's
 * own Encoder and Decoder, as its one flexible request (ListPartitionReassignments v0) does. kafkajs asks in
 * the highest version both sides know; a broker without version 7 (before Kafka 2.5) makes a stable read fail
 * with a message saying so, rather than quietly reading the unstable offset.
 */
/* eslint-disable @typescript-eslint/no-require-imports */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Admin } from 'kafkajs';

interface Encoder {
  writeInt8(value: number): Encoder;
  writeInt32(value: number): Encoder;
  writeUVarInt(value: number): Encoder;
  writeUVarIntString(value: string | null): Encoder;
  writeUVarIntBytes(value?: Buffer | null): Encoder;
  writeUVarIntArray(array: Encoder[] | null): Encoder;
}
interface Decoder {
  readInt16(): number;
  readInt32(): number;
  readInt64(): { toString(): string };
  readUVarIntString(): string | null;
  readUVarIntArray<T>(reader: (decoder: Decoder) => T): T[] | null;
  readTaggedFields(): unknown;
}
type EncoderClass = new () => Encoder;
type DecoderClass = new (buffer: Buffer) => Decoder;
interface RequestTopic { topic: string; partitions: { partition: number }[] }
interface ResponsePartition { partition: number; offset: string; metadata: string | null; errorCode: number }
interface OffsetFetchDecoded {
  throttleTime: number;
  clientSideThrottleTime: number;
  responses: { topic: string; partitions: ResponsePartition[] }[];
  errorCode: number;
}
interface ProtocolVersion {
  request: { apiKey: number; apiVersion: number; apiName: string; encode(): Promise<Encoder> };
  response: { decode(raw: Buffer): Promise<OffsetFetchDecoded>; parse(data: OffsetFetchDecoded): Promise<OffsetFetchDecoded> };
}
interface RequestDefinition {
  versions: string[];
  protocol(options: { version: number }): (args: { groupId: string; topics: RequestTopic[] | null }) => ProtocolVersion;
}

const STABLE_OFFSET_FETCH_VERSION = 7;
const OFFSET_FETCH_API_KEY = 9;

let installed = false;

/** Add OffsetFetch version 7 (require_stable) to kafkajs; once per process, before or after clients exist. */
export function useStableOffsetFetch(): void {
  if (installed) return;
  const Encoder = require('kafkajs/src/protocol/encoder') as EncoderClass;
  const Decoder = require('kafkajs/src/protocol/decoder') as DecoderClass;
  const definition = require('kafkajs/src/protocol/requests/offsetFetch') as RequestDefinition;
  // Errors are raised as for version 2, except, in a stable read, a partition's UNSTABLE_OFFSET_COMMIT: that
  // partition's offset comes back as UNSTABLE (the read is about one partition, and others may be busy).
  const { parse: parseV2 } = require('kafkajs/src/protocol/requests/offsetFetch/v2/response') as { parse: ProtocolVersion['response']['parse'] };
  const parseStable: ProtocolVersion['response']['parse'] = (data) => parseV2({
    ...data,
    responses: data.responses.map(({ topic, partitions }) => ({
      topic,
      partitions: partitions.map((p) => (p.errorCode === UNSTABLE_OFFSET_COMMIT_CODE ? { ...p, offset: UNSTABLE, errorCode: 0 } : p)),
    })),
  });

  const encodeTopic = ({ topic, partitions }: RequestTopic): Encoder => new Encoder()
    .writeUVarIntString(topic)
    .writeUVarIntArray(partitions.map(({ partition }) => new Encoder().writeInt32(partition)))
    .writeUVarInt(0); // no tagged fields

  const decodePartition = (decoder: Decoder): ResponsePartition => {
    const partition = decoder.readInt32();
    const offset = decoder.readInt64().toString();
    decoder.readInt32(); // committed leader epoch
    const metadata = decoder.readUVarIntString();
    const errorCode = decoder.readInt16();
    decoder.readTaggedFields();
    return { partition, offset, metadata, errorCode };
  };
  const decodeTopic = (decoder: Decoder) => {
    const topic = decoder.readUVarIntString() ?? '';
    const partitions = decoder.readUVarIntArray(decodePartition) ?? [];
    decoder.readTaggedFields();
    return { topic, partitions };
  };

  const version7 = ({ groupId, topics }: { groupId: string; topics: RequestTopic[] | null }): ProtocolVersion => {
    const stable = stableReads.getStore() === true;
    return {
      request: {
        apiKey: OFFSET_FETCH_API_KEY,
        apiVersion: STABLE_OFFSET_FETCH_VERSION,
        apiName: 'OffsetFetch',
        encode: async () => new Encoder()
          .writeUVarIntBytes() // the request header's tagged fields (header version 2): none
          .writeUVarIntString(groupId)
          .writeUVarIntArray(topics === null ? null : topics.map(encodeTopic))
          .writeInt8(stable ? 1 : 0) // require_stable
          .writeUVarInt(0),
      },
      response: {
        async decode(raw: Buffer) {
          const decoder = new Decoder(raw);
          decoder.readTaggedFields(); // the response header's (header version 1)
          const throttleTime = decoder.readInt32();
          const responses = decoder.readUVarIntArray(decodeTopic) ?? [];
          const errorCode = decoder.readInt16();
          decoder.readTaggedFields();
          // As kafkajs's version 4 (KIP-219): the broker answers before it throttles, and kafkajs waits out the time.
          return { throttleTime: 0, clientSideThrottleTime: throttleTime, responses, errorCode };
        },
        parse: stable ? parseStable : parseV2,
      },
    };
  };

  const older = definition.protocol;
  // A broker whose highest version is 5 or 6 (Kafka 2.1 to 2.4) is asked in version 4, as before.
  definition.protocol = ({ version }) => {
    if (version === STABLE_OFFSET_FETCH_VERSION) return version7;
    if (stableReads.getStore() === true) throw new Error(`the Kafka broker offers OffsetFetch up to version ${version}; a stable committed-offset read needs version 7 (Kafka 2.5 or later)`);
    return older({ version: Math.min(version, 4) });
  };
  if (!definition.versions.includes(String(STABLE_OFFSET_FETCH_VERSION))) definition.versions.push(String(STABLE_OFFSET_FETCH_VERSION));
  installed = true;
}

/** How often a read refused as unstable is tried again. */
const UNSTABLE_RETRY_MS = 100;

/** The offset a stable read gives a partition whose committed offset is not stable yet. */
const UNSTABLE = 'unstable';
const UNSTABLE_OFFSET_COMMIT_CODE = 88;
const stableReads = new AsyncLocalStorage<boolean>();

/**
 * One stable read of the group's committed offsets of `topic`: each partition's offset (-1 when none), or `null`
 * for a partition whose offset is not stable yet (a transaction that commits it has not had its markers written).
 * Errors are kafkajs's, retriable ones included (a coordinator loading or moving).
 */
export async function stableCommittedOffsets(admin: Admin, groupId: string, topic: string): Promise<Map<number, string | null>> {
  const [committed] = await stableReads.run(true, () => admin.fetchOffsets({ groupId, topics: [topic] }));
  return new Map((committed?.partitions ?? []).map((p) => [p.partition, p.offset === UNSTABLE ? null : p.offset]));
}

/**
 * The group's committed offset of one partition of `topic` (-1 when none), stable: while a transaction that
 * commits offsets of that partition has not had its markers written, the read is tried again every
 * UNSTABLE_RETRY_MS, until `giveUpAt` (Date.now() time) or `stop()`, after which it throws. So is a read that
 * failed with an error kafkajs counts as retriable (a coordinator loading or moving). `waited` hears of a read
 * that had to wait and then got a stable offset, and for how long.
 *
 * It never falls back to the unstable offset: that is the offset from before the pending transaction, and a
 * stage that started there would handle the transaction's records a second time (seen after broker restarts:
 * a commit's offset marker took longer than the wait). Nor does anything here abort a pending commit: one
 * whose marker never came belonged, in the tests, to a transaction that had committed its outputs. Such a
 * commit keeps the partition waiting until an operator acts (docs/kafka.md).
 */
export async function stableCommittedOffset(admin: Admin, groupId: string, topic: string, partition: number, giveUpAt: number, stop: () => boolean = () => false, waited: (w: { offset: string; ms: number }) => void = () => undefined): Promise<string> {
  const started = Date.now();
  let unstable = false;
  for (;;) {
    let offset: string | null;
    try {
      const read = await stableCommittedOffsets(admin, groupId, topic);
      offset = read.has(partition) ? read.get(partition)! : '-1';
    } catch (error) {
      if (!(error as { retriable?: unknown } | null)?.retriable || Date.now() >= giveUpAt || stop()) throw error;
      // A coordinator loading or moving: asked again, and not counted as a pending offset commit.
      await new Promise((resolve) => setTimeout(resolve, UNSTABLE_RETRY_MS));
      continue;
    }
    if (offset !== null) {
      if (unstable) waited({ offset, ms: Date.now() - started });
      return offset;
    }
    unstable = true;
    if (stop() || Date.now() >= giveUpAt) {
      throw new Error(`the committed offset of ${topic} partition ${partition} for group ${groupId} was not stable after ${Date.now() - started} ms: `
        + 'a transaction that commits it has not had its markers written. It is read again. If it stays so, a marker was lost: '
        + 'read docs/kafka.md, "A partition that waits for a pending offset commit", before aborting anything (an abort can execute records twice)');
    }
    await new Promise((resolve) => setTimeout(resolve, UNSTABLE_RETRY_MS));
  }
}
