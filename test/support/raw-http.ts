import * as net from 'node:net';

/** Raw bytes over one connection, written in turn a moment apart; resolves with everything the server sent once it closes. */
export function rawExchange(baseUrl: string, ...writes: string[]): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = net.connect({ host: hostname, port: Number(port) }, async () => {
      for (const w of writes) { socket.write(w, 'latin1'); await new Promise((r) => setTimeout(r, 20)); }
    });
    socket.on('data', (d) => { answer += d.toString('latin1'); });
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
  });
}

/** The answers in what a connection carried, in order. */
export const splitAnswers = (raw: string): string[] => raw.split(/(?=HTTP\/1\.1 \d{3} )/).filter((a) => a.length > 0);

/** The status line, headers (lower-cased names) and body of one raw HTTP answer. */
export function parsedAnswer(raw: string) {
  const [head, body] = [raw.slice(0, raw.indexOf('\r\n\r\n')), raw.slice(raw.indexOf('\r\n\r\n') + 4)];
  const [statusLine, ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.slice(9, 12)), statusLine, headers, body };
}

/** A POST of `body` (JSON) to `path`, as raw bytes. */
export const rawPost = (path: string, body = '{}', extraHeaders = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${extraHeaders}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** One answer read off a connection: `cut` when the connection closed before its body was whole. */
export interface Answer { status: number; statusLine: string; headers: Record<string, string>; body: string; cut?: boolean }

/**
 * The whole answers at the front of `raw` (interim 1xx answers skipped), and the bytes after them. `heads` says,
 * answer by answer, whether it answers a HEAD (no body, whatever its Content-Length). With `final` (the connection
 * closed), an answer whose body is not whole is taken as it is, marked `cut`. An event stream is taken at its headers.
 * Throws on what is no HTTP/1.1 answer.
 */
export function splitRawAnswers(raw: Buffer, heads: readonly boolean[] = [], final = false): { answers: Answer[]; rest: Buffer } {
  const answers: Answer[] = [];
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) {
      if (final && rest.length > 0) throw new Error(`the connection closed inside an answer's head: ${JSON.stringify(rest.subarray(0, 200).toString('latin1'))}`);
      return { answers, rest };
    }
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    if (!/^HTTP\/1\.1 [1-5]\d\d [\x20-\x7e]*$/.test(statusLine)) throw new Error(`no status line: ${JSON.stringify(statusLine.slice(0, 200))}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon <= 0) throw new Error(`a header line without a name: ${JSON.stringify(line.slice(0, 200))}`);
      headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
    }
    const status = Number(statusLine.slice(9, 12));
    let body = rest.subarray(end + 4);
    if (status < 200) { rest = body; continue; }
    const head = heads[answers.length] === true;
    const take = (bytes: Buffer, after: Buffer, cut = false) => {
      answers.push({ status, statusLine, headers, body: bytes.toString('utf8'), ...(cut ? { cut } : {}) });
      rest = after;
    };
    // What answers a HEAD has no body, unless it answers no HEAD at all: the parser's refusal of a request line
    // it could not read, whose body follows (what follows an answer to a HEAD is the next answer).
    if (head && headers['content-length'] !== undefined && body.length > 0 && !body.toString('latin1').startsWith('HTTP/')) {
      const length = Number(headers['content-length']);
      if (body.length >= length) { take(body.subarray(0, length), body.subarray(length)); continue; }
    }
    if (head || status === 204 || status === 304 || (headers['content-type'] ?? '').startsWith('text/event-stream')) { take(Buffer.alloc(0), body); continue; }
    if (headers['transfer-encoding'] === 'chunked') {
      const chunks: Buffer[] = [];
      let whole = false;
      for (;;) {
        const eol = body.indexOf('\r\n');
        if (eol < 0) break;
        const size = parseInt(body.subarray(0, eol).toString('latin1'), 16);
        if (Number.isNaN(size)) throw new Error('a chunk size that is no hex number');
        if (size === 0) { if (body.indexOf('\r\n', eol + 2) < 0) break; body = body.subarray(body.indexOf('\r\n', eol + 2) + 2); whole = true; break; }
        if (body.length < eol + 2 + size + 2) break;
        chunks.push(body.subarray(eol + 2, eol + 2 + size));
        body = body.subarray(eol + 2 + size + 2);
      }
      if (whole) { take(Buffer.concat(chunks), body); continue; }
      if (final) take(Buffer.concat(chunks), Buffer.alloc(0), true);
      return { answers, rest: final ? Buffer.alloc(0) : rest };
    }
    if (headers['content-length'] === undefined) {
      // Delimited by the close: whole only once the connection has closed.
      if (final) take(body, Buffer.alloc(0));
      return { answers, rest: final ? Buffer.alloc(0) : rest };
    }
    const length = Number(headers['content-length']);
    if (!Number.isSafeInteger(length) || length < 0) throw new Error(`Content-Length ${headers['content-length']}`);
    if (body.length >= length) { take(body.subarray(0, length), body.subarray(length)); continue; }
    if (final) take(body, Buffer.alloc(0), true);
    return { answers, rest: final ? Buffer.alloc(0) : rest };
  }
}

export interface Conversation {
  answers: Answer[];
  /** The server closed the connection (or it was reset) before `want` answers came. */
  closed: boolean;
  /** Bytes after the last whole answer (none unless the server sent something that is no answer). */
  rest: Buffer;
  /** Everything the server sent. */
  raw: Buffer;
}

/**
 * `request` as raw bytes on a connection of its own; resolves once `want` answers are whole, or the server closes
 * the connection. `end` shuts the client's sending side after the bytes (a FIN: the client sends nothing more).
 * Rejects when neither happens within `ms` (a hang), or on what is no HTTP/1.1 answer.
 */
export function converse(baseUrl: string, request: Buffer, options: { want?: number; heads?: readonly boolean[]; end?: boolean; ms?: number } = {}): Promise<Conversation> {
  const { want = 1, heads = [], end = false, ms = 15_000 } = options;
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let raw = Buffer.alloc(0);
    let settled = false;
    // Written, not ended (unless asked): a server that sees the client's half-close may take it as the end of the request.
    const socket = net.connect({ host: hostname, port: Number(port) }, () => { if (end) socket.end(request); else socket.write(request); });
    const timer = setTimeout(() => finish(() => reject(new Error(`no ${want} complete answer(s) within ${ms} ms; got ${JSON.stringify(raw.subarray(0, 300).toString('latin1'))}`))), ms);
    function finish(then: () => void) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      then();
    }
    const parse = (final: boolean) => {
      let split;
      try { split = splitRawAnswers(raw, heads, final); } catch (error) { finish(() => reject(error)); return; }
      if (split.answers.length >= want || final) finish(() => resolve({ answers: split.answers, closed: final, rest: split.rest, raw }));
    };
    socket.on('data', (d) => { raw = Buffer.concat([raw, d]); parse(false); });
    socket.on('error', () => parse(true));
    socket.on('end', () => parse(true));
    socket.on('close', () => parse(true));
  });
}

/**
 * One request as raw bytes on its own connection; its answer once its body is complete (Content-Length or the
 * last chunk), or at its headers for an event stream. Rejects when nothing complete arrives within `ms`: a hang.
 */
export async function exchange(baseUrl: string, request: Buffer, ms = 15_000): Promise<Answer> {
  const { answers, rest } = await converse(baseUrl, request, { ms });
  if (answers.length === 0) throw new Error(`connection closed after ${rest.length} bytes and no answer`);
  return answers[0];
}

/**
 * A request's bytes: `headers` as lines, each written as latin1 (a string with U+0080..U+00FF is sent as those
 * bytes), `Connection: close` unless `keepAlive`, and a Content-Length for `body` unless it is null.
 */
export function requestBytes(method: string, path: string, headers: Array<[string, string]>, body: Buffer | null, keepAlive = false): Buffer {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...(keepAlive ? [] : ['Connection: close']), ...headers.map(([n, v]) => `${n}: ${v}`)];
  if (body !== null) lines.push(`Content-Length: ${body.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body ?? Buffer.alloc(0)]);
}
