/**
 * OffsetFetch version 7 for kafkajs, with `require_stable` (KIP-447): the group coordinator answers
 * UNSTABLE_OFFSET_COMMIT for a partition while a transactional offset commit for it is pending, instead of
 * the last offset that was stable. kafkajs 2.2.4 implements OffsetFetch up to version 4 only, and no
 * maintained release adds more; this module adds version 7 to its table of request versions, so that every
 * OffsetFetch of this process (the admin's and the consumers' own) asks for stable offsets, as the Java
 * consumer does with read_committed.
 *
 * Why it matters (docs/kafka.md, "Exactly once"): a stage that takes a partition over reads the group's
 * committed offset. A transaction commits its offsets when its markers are written, which the transaction
 * coordinator does after it answered EndTxn; after a broker restart that can take seconds. A read in that
 * window returned the offset from before the transaction, and the stage moved back and handled the
 * transaction's records a second time (seen in test/e2e/lifecycle.test.ts: "kafka stage moves to the committed
 * offset", from 70 to 48, then 22 executions twice).
 *
 * Written here rather than taken from a library because kafkajs is the client (DESIGN.md §3) and has no
 * extension point for request versions; the encoding follows Kafka's OffsetFetchRequest.json and
 * OffsetFetchResponse.json (version 7 is the first flexible one with RequireStable) with kafkajs's own
 * Encoder and Decoder, as its one flexible request (ListPartitionReassignments v0) does. The broker picks the
 * highest version both sides know, so brokers older than 2.5 (no version 7) keep getting version 4.
 */
/* eslint-disable @typescript-eslint/no-require-imports */
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

export const STABLE_OFFSET_FETCH_VERSION = 7;
const OFFSET_FETCH_API_KEY = 9;

let installed = false;

/** Add OffsetFetch version 7 (require_stable) to kafkajs; once per process, before or after clients exist. */
export function useStableOffsetFetch(): void {
  if (installed) return;
  const Encoder = require('kafkajs/src/protocol/encoder') as EncoderClass;
  const Decoder = require('kafkajs/src/protocol/decoder') as DecoderClass;
  const definition = require('kafkajs/src/protocol/requests/offsetFetch') as RequestDefinition;
  // Errors (UNSTABLE_OFFSET_COMMIT included, which kafkajs counts as retriable) are raised as for version 2.
  const { parse } = require('kafkajs/src/protocol/requests/offsetFetch/v2/response') as { parse: ProtocolVersion['response']['parse'] };

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

  const version7 = ({ groupId, topics }: { groupId: string; topics: RequestTopic[] | null }): ProtocolVersion => ({
    request: {
      apiKey: OFFSET_FETCH_API_KEY,
      apiVersion: STABLE_OFFSET_FETCH_VERSION,
      apiName: 'OffsetFetch',
      encode: async () => new Encoder()
        .writeUVarIntBytes() // the request header's tagged fields (header version 2): none
        .writeUVarIntString(groupId)
        .writeUVarIntArray(topics === null ? null : topics.map(encodeTopic))
        .writeInt8(1) // require_stable
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
        // As kafkajs's version 4: the broker has already throttled (KIP-219), the client need not.
        return { throttleTime: 0, clientSideThrottleTime: throttleTime, responses, errorCode };
      },
      parse,
    },
  });

  const older = definition.protocol;
  // A broker whose highest version is 5 or 6 (Kafka 2.1 to 2.4) is asked in version 4, as before.
  definition.protocol = ({ version }) => (version === STABLE_OFFSET_FETCH_VERSION ? version7 : older({ version: Math.min(version, 4) }));
  if (!definition.versions.includes(String(STABLE_OFFSET_FETCH_VERSION))) definition.versions.push(String(STABLE_OFFSET_FETCH_VERSION));
  installed = true;
}

/** How often a read refused as unstable is tried again. */
export const UNSTABLE_RETRY_MS = 100;

export const isUnstableOffsetCommit = (error: unknown): boolean => (error as { type?: unknown } | null)?.type === 'UNSTABLE_OFFSET_COMMIT';

/**
 * The group's committed offsets of `topic`, stable: a read refused with UNSTABLE_OFFSET_COMMIT (a transaction
 * committing offsets of one of its partitions has not had its markers written yet) is tried again every
 * UNSTABLE_RETRY_MS until `giveUpAt` (Date.now() time), after which that error is thrown.
 */
export async function stableCommittedOffsets(admin: Admin, groupId: string, topic: string, giveUpAt: number, stopping: () => boolean = () => false): Promise<{ partition: number; offset: string }[]> {
  for (;;) {
    try {
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      return committed?.partitions ?? [];
    } catch (error) {
      if (!isUnstableOffsetCommit(error) || Date.now() >= giveUpAt || stopping()) throw error;
      await new Promise((resolve) => setTimeout(resolve, UNSTABLE_RETRY_MS));
    }
  }
}
