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
