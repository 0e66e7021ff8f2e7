"""pyas2lib as an independent AS2 partner for the interoperability tests (run with infra/pyas2/.venv/bin/python).

  build      build an outbound AS2 message with pyas2lib's Message.build; write its HTTP headers (JSON),
             its body, and the state needed to check the MDN later (message id, MIC, digest) to files.
  parse-mdn  parse an MDN (HTTP headers JSON + body) with pyas2lib's Mdn.parse against that state; print
             JSON {status, detailed_status, mic_ok, signed, signature_verified, original_message_found}.
  receive    a minimal pyas2lib AS2 receiver (Message.parse + Mdn.build) on 127.0.0.1:PORT, for the benchmark;
             prints "listening on http://127.0.0.1:PORT" when ready; --processes N pre-forks N processes.

Keys and certificates are PEM files (a party's key file may hold the key and its certificate). Nothing here
uses the code under test.
"""
import argparse
import json
import sys

import pyas2lib.as2 as as2

_verified = []
_verify_message = as2.verify_message


def _recording_verify(*args, **kwargs):
    """pyas2lib's own verify_message; records that a signature verified (it raises otherwise)."""
    digest = _verify_message(*args, **kwargs)
    _verified.append(digest)
    return digest


as2.verify_message = _recording_verify


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def organization(name, key_and_cert, mdn_url=None):
    return as2.Organization(as2_name=name, sign_key=key_and_cert, decrypt_key=key_and_cert, mdn_url=mdn_url)


def raw_http(headers, body):
    head = ''.join(f'{k}: {v}\r\n' for k, v in headers.items())
    return head.encode('utf-8') + b'\r\n' + body


def build(a):
    org = organization(a.sender, read(a.sender_key) + b'\n' + read(a.sender_cert), a.mdn_url)
    partner = as2.Partner(
        as2_name=a.receiver,
        encrypt_cert=read(a.receiver_cert),
        verify_cert=read(a.receiver_cert),
        sign=a.sign,
        digest_alg=a.digest,
        encrypt=bool(a.encrypt),
        enc_alg=a.encrypt or 'tripledes_192_cbc',
        compress=a.compress,
        mdn_mode=None if a.mdn == 'none' else a.mdn.upper(),
        mdn_digest_alg=None if a.mdn_digest == 'none' else a.mdn_digest,
        key_enc_alg=a.key_enc,
    )
    message = as2.Message(org, partner)
    message.build(read(a.payload), filename=a.filename, subject=a.subject, content_type=a.content_type,
                  disposition_notification_to='as2@partner.example')
    headers = {k: str(v) for k, v in message.headers.items()}
    with open(a.out + '.headers.json', 'w') as f:
        json.dump(headers, f)
    with open(a.out + '.body', 'wb') as f:
        f.write(message.content)
    state = {
        'message_id': message.message_id,
        'mic': message.mic.decode() if message.mic else None,
        'digest_alg': message.digest_alg,
        'mdn_digest_alg': partner.mdn_digest_alg,
    }
    with open(a.out + '.state.json', 'w') as f:
        json.dump(state, f)
    print(json.dumps(state))


def parse_mdn(a):
    state = json.loads(read(a.state))
    headers = json.loads(read(a.headers))
    raw = raw_http(headers, read(a.body))
    # The receiver as pyas2lib's partner: its certificate verifies the MDN signature.
    partner = as2.Partner(as2_name=a.receiver, verify_cert=read(a.receiver_cert), mdn_mode='SYNC',
                          mdn_digest_alg=state['mdn_digest_alg'])
    original = as2.Message(organization(a.sender, read(a.sender_key) + b'\n' + read(a.sender_cert)), partner)
    original.message_id = state['message_id']
    original.mic = state['mic'].encode() if state['mic'] else None
    original.digest_alg = state['digest_alg']
    found = []

    def find_message(message_id, recipient):
        found.append([message_id, recipient])
        return original if message_id == state['message_id'] else None

    mdn = as2.Mdn()
    status, detailed = mdn.parse(raw, find_message)
    mic_line = None
    for line in raw.decode('latin-1').splitlines():
        if line.lower().startswith('received-content-mic:'):
            mic_line = line.split(':', 1)[1].strip()
    mdn_mic = mic_line.split(',')[0].strip() if mic_line else None
    print(json.dumps({
        'status': status,
        'detailed_status': detailed,
        'original_message_found': bool(found) and found[0][0] == state['message_id'],
        'original_recipient': found[0][1] if found else None,
        'signed': (headers.get('content-type') or headers.get('Content-Type') or '').startswith('multipart/signed'),
        'signature_verified': bool(_verified),
        'mic': mic_line,
        'mic_ok': state['mic'] is not None and mdn_mic == state['mic'],
    }))


def receive(a):
    import os
    import signal
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    org = organization(a.receiver, read(a.receiver_key) + b'\n' + read(a.receiver_cert))
    partner = as2.Partner(as2_name=a.sender, verify_cert=read(a.sender_cert), sign=True, encrypt=True,
                          validate_certs=False)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get('Content-Length', '0')))
            raw = raw_http({k: v for k, v in self.headers.items()}, body)
            status, _exc, mdn = as2.Message().parse(raw, find_org_partner_cb=lambda o, p: (org, partner))
            out = mdn.content if mdn else b''
            if isinstance(out, str):
                out = out.encode()
            self.send_response(200)
            for k, v in (mdn.headers.items() if mdn else []):
                self.send_header(k, str(v).replace('\r', ' ').replace('\n', ' '))
            self.send_header('X-Pyas2-Status', status)
            self.send_header('Content-Length', str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(('127.0.0.1', a.port), Handler)
    server.daemon_threads = True
    # Pre-fork: every process accepts on the same listening socket; SIGTERM to the first stops them all.
    children = []
    for _ in range(a.processes - 1):
        pid = os.fork()
        if pid == 0:
            children = None
            break
        children.append(pid)
    if children is not None:
        def stop(*_args):
            for pid in children:
                os.kill(pid, signal.SIGTERM)
            os._exit(0)
        signal.signal(signal.SIGTERM, stop)
        print(f'listening on http://127.0.0.1:{server.server_address[1]} ({a.processes} processes)', flush=True)
    server.serve_forever()


def add_parties(parser, keyed):
    """The two AS2 parties' names and certificates; `keyed` is the one whose private key this command uses."""
    for party in ('sender', 'receiver'):
        parser.add_argument(f'--{party}', required=True)
        if party == keyed:
            parser.add_argument(f'--{party}-key', required=True)
        parser.add_argument(f'--{party}-cert', required=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='cmd', required=True)
    b = sub.add_parser('build')
    add_parties(b, 'sender')
    b.add_argument('--sign', action='store_true')
    b.add_argument('--digest', default='sha256')
    b.add_argument('--encrypt', default=None, help='one of ' + ', '.join(as2.ENCRYPTION_ALGORITHMS))
    b.add_argument('--key-enc', default='rsaes_pkcs1v15')
    b.add_argument('--compress', action='store_true')
    b.add_argument('--mdn', choices=['none', 'sync', 'async'], default='sync')
    b.add_argument('--mdn-url', default=None, help='where an asynchronous MDN is to be delivered (--mdn async)')
    b.add_argument('--mdn-digest', default='sha256', help="'none' for an unsigned MDN")
    b.add_argument('--payload', required=True)
    b.add_argument('--content-type', default='application/edi-x12')
    b.add_argument('--filename', default=None)
    b.add_argument('--subject', default='AS2 Message')
    b.add_argument('--out', required=True, help='path prefix: writes .headers.json, .body, .state.json')
    m = sub.add_parser('parse-mdn')
    add_parties(m, 'sender')
    m.add_argument('--state', required=True)
    m.add_argument('--headers', required=True)
    m.add_argument('--body', required=True)
    r = sub.add_parser('receive')
    add_parties(r, 'receiver')
    r.add_argument('--port', type=int, default=0)
    r.add_argument('--processes', type=int, default=1)
    a = p.parse_args()
    {'build': build, 'parse-mdn': parse_mdn, 'receive': receive}[a.cmd](a)


if __name__ == '__main__':
    main()
