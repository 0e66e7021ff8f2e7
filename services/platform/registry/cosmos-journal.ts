import type { Database, JSONObject, OperationInput, SqlParameter } from '@azure/cosmos';
import { checkedQuery, newestFirst, oldestFirst, type JournalEntry, type JournalStore } from './journal';
import { RegistryError } from './registry';
import { readRetried, type WithinDeadline } from './cosmos-calls';

/**
 * The request journal on Cosmos DB: container `journal`, partitioned by `/requestId`, so a request's journey
 * is one single-partition query and a search is one cross-partition query ordered by time. Retention is
 * Cosmos's own: the container has TTL on (`defaultTtl: -1`) and every entry carries `ttl`, what is left of the
 * retention counted from the entry's `at`, in seconds, so the service deletes nothing itself. A batch of entries is written with one bulk call.
 */
const CONTAINER = 'journal';
/** Cosmos bulk takes at most 100 operations a call. */
const BULK_LIMIT = 100;
/** The HTTP status of a Cosmos error. */
const statusOf = (error: unknown): number | undefined => (typeof (error as { code?: unknown })?.code === 'number' ? (error as { code: number }).code : undefined);
const COSMOS_FIELDS = ['_rid', '_self', '_etag', '_attachments', '_ts', 'ttl'] as const;

type Unavailable = (what: string, error: unknown) => RegistryError;

export async function openCosmosJournal(database: Database, retentionDays: number, unavailable: Unavailable, within: WithinDeadline): Promise<JournalStore> {
  const { container, resource } = await database.containers.createIfNotExists({ id: CONTAINER, partitionKey: { paths: ['/requestId'] }, defaultTtl: -1 });
  const paths = resource?.partitionKey?.paths;
  if (paths && (paths.length !== 1 || paths[0] !== '/requestId')) {
    throw new RegistryError(`cosmos container ${database.id}/${CONTAINER} exists with partition key ${JSON.stringify(paths)}; the journal needs ["/requestId"]`, 'registry-unavailable');
  }
  // A container made without TTL (by hand) would keep entries for ever: turn TTL on, per item.
  if (resource && resource.defaultTtl === undefined) await container.replace({ ...resource, defaultTtl: -1 });
  const retention = Math.max(1, Math.round(retentionDays * 86_400));
  // Cosmos counts a TTL from the write: counted from the entry's time, an entry written late (a journal catching
  // up, a new group reading a topic from its start, a redelivery) goes when the retention says, not up to twice
  // as long after it happened. Never more than the retention (an `at` ahead of this clock).
  const ttlOf = (entry: JournalEntry, now: number) => Math.min(retention, Math.max(1, Math.round(retention - (now - entry.at) / 1000)));

  const plain = (resource: Record<string, unknown>): JournalEntry => {
    const copy = { ...resource };
    for (const field of COSMOS_FIELDS) delete copy[field];
    return copy as unknown as JournalEntry;
  };
  const query = async (text: string, parameters: SqlParameter[], partitionKey?: string): Promise<JournalEntry[]> => {
    return within('query the journal', async (abortSignal) => {
      try {
        const { resources } = await readRetried(() => container.items.query<Record<string, unknown>>({ query: text, parameters }, { ...(partitionKey !== undefined ? { partitionKey } : {}), abortSignal }).fetchAll(), abortSignal, statusOf);
        return resources.map(plain);
      } catch (error) {
        throw unavailable('query the journal', error);
      }
    });
  };

  return {
    async upsert(entries) {
      for (let i = 0; i < entries.length; i += BULK_LIMIT) {
        const now = Date.now();
        const operations: OperationInput[] = entries.slice(i, i + BULK_LIMIT).map((entry) => ({ operationType: 'Upsert', resourceBody: { ...entry, ttl: ttlOf(entry, now) } as unknown as JSONObject }));
        let results;
        try { results = await within('write journal entries', (abortSignal) => container.items.bulk(operations, undefined, { abortSignal })); } catch (error) { throw error instanceof RegistryError ? error : unavailable('write journal entries', error); }
        const failed = results.find((r) => r.statusCode >= 300);
        // The stage retries the whole record; upserts make the entries already written harmless.
        // 400 and 413 say the entry itself is wrong, which no retry mends; anything else is the service's state.
        if (failed) throw new RegistryError(`cosmos registry could not write journal entries: HTTP ${failed.statusCode}`, failed.statusCode === 400 || failed.statusCode === 413 ? 'invalid-document' : 'registry-unavailable');
      }
    },

    async request(requestId) {
      return (await query('SELECT * FROM c WHERE c.requestId = @requestId', [{ name: '@requestId', value: requestId }], requestId)).sort(oldestFirst);
    },

    async search(raw) {
      const q = checkedQuery(raw);
      const conditions: string[] = [];
      const parameters: SqlParameter[] = [];
      const where = (condition: string, name: string, value: string | number) => { conditions.push(condition); parameters.push({ name, value }); };
      if (q.requestId !== undefined) where('c.requestId = @requestId', '@requestId', q.requestId);
      if (q.workflowId !== undefined) where('c.workflowId = @workflowId', '@workflowId', q.workflowId);
      if (q.key !== undefined) where('ARRAY_CONTAINS(c.keys, @key)', '@key', q.key);
      if (q.since !== undefined) where('c.at >= @since', '@since', q.since);
      if (q.until !== undefined) where('c.at < @until', '@until', q.until);
      // limit is a checked whole number (checkedQuery), so it is safe inline; TOP takes no parameter there.
      const text = `SELECT TOP ${q.limit} * FROM c${conditions.length ? ` WHERE ${conditions.join(' AND ')}` : ''} ORDER BY c.at DESC`;
      return (await query(text, parameters, q.requestId)).sort(newestFirst);
    },

    async prune() {
      return 0;
    },
  };
}
