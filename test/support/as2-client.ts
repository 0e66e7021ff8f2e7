import { randomUUID } from 'node:crypto';
import { defaultAvroCodec } from '../../services/platform/avro/codec';
import { createCredentialSealer } from '../../services/platform/registry/credential-crypto';
import type { ExecutionRequested } from '../../services/platform/avro/records';
import { collectUntilQuiet } from './log-reads';
import type { Built, Party, Peer } from './as2-peer';
import type { TestApp } from './app';

/** Posting AS2 messages the way a partner's AS2 server does, and reading what the ingress made of them. */
const codec = defaultAvroCodec();

/**
 * An active workflow whose one node receives AS2 with credential `credential`: `receiver`'s key pair, pinned to
 * `partner`'s certificate. Stored straight in the app's registry, sealed with its key.
 */
export async function putAs2Workflow(app: TestApp, ids: { workflow: string; credential: string }, keys: { receiver: Party; partner: Party }, parameters: Record<string, unknown> = {}): Promise<void> {
  const sealer = createCredentialSealer(app.config.encryptionKey!);
  await app.backends.registry.credentials.put(sealer.seal({ id: ids.credential, type: 'as2ReceiverAuth', data: { certificate: keys.receiver.cert, privateKey: keys.receiver.key, partnerCertificate: keys.partner.cert } }));
  await app.backends.registry.workflows.put({ id: ids.workflow, active: true, nodes: [
    { name: 'AS2 in', type: 'webhook', parameters: { protocol: 'as2', authentication: 'as2ReceiverAuth', ...parameters }, credentials: { as2ReceiverAuth: ids.credential } },
  ] });
}

export interface MdnSeen {
  status: number;
  headers: Headers;
  /** The multipart/report, after signature verification when signed. */
  report: string;
  signed: boolean;
  /** The HTTP body exactly as answered (the MDN without its top-level headers). */
  body: Buffer;
  disposition: string;
  mic: string | null;
  requestId: string;
}

export const SIGNED_RECEIPT = 'signed-receipt-protocol=optional, pkcs7-signature; signed-receipt-micalg=optional, sha-256, sha1';

export function as2Headers(overrides: Record<string, string | null> = {}): Record<string, string> {
  const base: Record<string, string | null> = {
    'AS2-Version': '1.2', 'AS2-From': 'PARTNER', 'AS2-To': 'INGRESS', 'Message-Id': `<${randomUUID()}@partner.example>`, Subject: 'PO 4711',
    'Disposition-Notification-To': 'as2@partner.example', 'Disposition-Notification-Options': SIGNED_RECEIPT, 'User-Agent': 'AS2-Test-Peer/1.0',
    ...overrides,
  };
  return Object.fromEntries(Object.entries(base).filter((e): e is [string, string] => e[1] !== null));
}

export async function postAs2(app: TestApp, workflowId: string, built: Built | Promise<Built> | { contentType: string; body: Buffer }, headers: Record<string, string>, peer: Peer, receiver: Party): Promise<MdnSeen> {
  const message = await built;
  const res = await fetch(`${app.baseUrl}/hook/${workflowId}`, { method: 'POST', headers: { ...headers, 'Content-Type': message.contentType }, body: message.body });
  const body = Buffer.from(await res.arrayBuffer());
  const contentType = res.headers.get('content-type') ?? '';
  const signed = contentType.startsWith('multipart/signed');
  const report = signed ? await peer.verifyMdn(contentType, body, receiver) : body.toString('latin1');
  return {
    status: res.status, headers: res.headers, report, signed, body,
    disposition: /^Disposition:\s*(.*)$/im.exec(report)?.[1].trim() ?? '',
    mic: /^Received-Content-MIC:\s*(.*)$/im.exec(report)?.[1].trim() ?? null,
    requestId: res.headers.get('x-request-id') ?? '',
  };
}

/**
 * The MDN as answered, as one MIME entity: the MDN's headers from the HTTP answer, in the order and
 * spelling `Received.as2.mdn` and the `mdn` evidence use (evidence.ts), then the body.
 */
export function answeredEntity(mdn: MdnSeen): Buffer {
  const names = ['content-type', 'message-id', 'as2-from', 'as2-to', 'as2-version', 'date', 'subject', 'mime-version', 'ediint-features'];
  const lines = names.filter((n) => mdn.headers.get(n) !== null).map((n) => `${n}: ${mdn.headers.get(n)}`);
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1'), mdn.body]);
}

/** The executions a request became, waiting until `count` arrive. */
export async function executionsOf(app: TestApp, requestId: string, count = 1, timeoutMs = 20_000): Promise<ExecutionRequested[]> {
  const deadline = Date.now() + timeoutMs;
  let found: ExecutionRequested[] = [];
  while (Date.now() < deadline) {
    found = (await collectUntilQuiet(app.backends.log, app.topics.executions, 300, 500)).map((r) => codec.decode('ExecutionRequested', r.value)).filter((e) => e.requestId === requestId);
    if (found.length >= count) return found.sort((a, b) => a.batchIndex - b.batchIndex);
  }
  throw new Error(`request ${requestId} became ${found.length} executions, expected ${count}`);
}
