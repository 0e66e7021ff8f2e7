import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { openEmbeddedLog } from '../../services/platform/log/embedded/embedded-log';
import { TOPIC_NAMES } from '../../services/platform/log/topics';
import { collectUntilQuiet } from '../support/log-reads';
import { backendEnv } from '../support/app';
import { as2Headers } from '../support/as2-client';
import { createPeer } from '../support/as2-peer';
import { startServiceProcess, waitForExit } from '../support/cli-process';
import { putAsyncMdnWorkflow, startMdnReceiver } from '../support/mdn-receiver';

/**
 * An asynchronous MDN's retries are records in the log, not timers: `kill -9` of the service while the
 * partner's endpoint fails, a restart, and the MDN arrives once the endpoint is back, delivered once.
 */
test('kill -9 mid-retry, restart: the MDN is delivered once the receiver is back, and only once', async () => {
  const { env, cleanup } = backendEnv('embedded', { AS2_MDN_RETRY_DELAYS: '200ms,400ms,800ms', AS2_MDN_RETRY_HOURS: '1', AS2_MDN_FIRST_ATTEMPT_DELAY: '100ms' });
  const peer = createPeer();
  const mdns = await startMdnReceiver();
  try {
    const receiver = await peer.party('receiver');
    expect(await putAsyncMdnWorkflow(env, receiver, mdns)).toBe(true);

    mdns.answer = () => ({ status: 503 });
    const first = await startServiceProcess(env);
    // A plain message from an unpinned partner, with an unsigned receipt asked for asynchronously.
    const headers = as2Headers({ 'Disposition-Notification-Options': null, 'Receipt-Delivery-Option': `http://127.0.0.1:${mdns.port}/mdn/inbox`, 'Content-Type': 'application/edi-x12' });
    const res = await fetch(`${first.baseUrl}/hook/wf-async`, { method: 'POST', headers, body: 'ISA*00*~ST*850*0001~SE*2*0001~' });
    expect([res.status, (await res.arrayBuffer()).byteLength]).toEqual([200, 0]);
    const requestId = res.headers.get('x-request-id');
    // Two attempts failed: the second was a retry record's. Killed while the next retry waits (or runs).
    await mdns.seen(2);
    first.child.kill('SIGKILL');
    await waitForExit(first.child);
    const failed = mdns.posts.length;
    mdns.answer = () => ({ status: 200 });

    const second = await startServiceProcess(env);
    await mdns.seen(failed + 1);
    second.child.kill('SIGTERM');
    await waitForExit(second.child);

    const log = await openEmbeddedLog({ dataDir: env.DATA_DIR, readOnly: true });
    const codec = defaultAvroCodec();
    const outcomes = (await collectUntilQuiet(log, TOPIC_NAMES.mdnOutcomes, 300)).map((r) => codec.decode('MdnOutcome', r.value)).filter((o) => o.requestId === requestId);
    await log.close();
    // One delivery: the first POST answered 200 was the last POST, and the log says delivered once.
    expect(mdns.posts.length).toBe(failed + 1);
    expect(outcomes.filter((o) => o.outcome === 'delivered')).toHaveLength(1);
    expect(outcomes.at(-1)!.outcome).toBe('delivered');
    expect(outcomes.slice(0, -1).every((o) => o.outcome === 'retrying' && o.status === 503)).toBe(true);
    // Every POST carried the same MDN: the same Message-ID, the same bytes.
    expect(new Set(mdns.posts.map((p) => p.headers['message-id'])).size).toBe(1);
    expect(new Set(mdns.posts.map((p) => p.body.toString('base64'))).size).toBe(1);
    expect(mdns.posts[0].headers).toMatchObject({ 'as2-from': 'INGRESS', 'as2-to': 'PARTNER', 'as2-version': '1.2' });
  } finally {
    await mdns.close();
    peer.cleanup();
    cleanup();
  }
}, 60_000);
