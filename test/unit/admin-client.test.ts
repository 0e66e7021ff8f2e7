import { AdminClientError, cleartextProblem, findRunningService } from '../../services/admin/client';

const TOKEN = 'a'.repeat(40);

test('ADMIN_URL: plain http only to a loopback host; https to any host', () => {
  for (const url of ['http://127.0.0.1:8081', 'http://127.9.8.7:8081', 'http://127.1:8081', 'http://[::1]:8081', 'http://localhost:8081', 'http://LOCALHOST.:8081', 'https://admin.example:8443', 'https://10.0.0.5:8081']) {
    expect({ url, problem: cleartextProblem(url) }).toEqual({ url, problem: null });
  }
  for (const url of ['http://10.0.0.5:8081', 'http://admin.example', 'http://128.0.0.1:8081', 'http://[::2]:8081', 'http://localhost.evil.com:8081', 'http://127.0.0.1.nip.io:8081']) {
    expect({ url, problem: cleartextProblem(url) }).toEqual({ url, problem: expect.stringMatching(/is plain http to .*, which is not this machine: the admin token .* would cross the network in clear\. Use https:\/\//) });
  }
});

test('the CLI refuses a plain-http ADMIN_URL to another host before sending anything', async () => {
  let sent = 0;
  const realFetch = global.fetch;
  global.fetch = (async () => { sent++; throw new Error('no network in this test'); }) as typeof fetch;
  try {
    const refused = findRunningService({ adminClient: { url: 'http://10.0.0.5:8081', token: TOKEN }, dataDir: '/nonexistent' });
    await expect(refused).rejects.toThrow(AdminClientError);
    await expect(refused).rejects.toThrow(/^ADMIN_URL=http:\/\/10\.0\.0\.5:8081 is plain http to 10\.0\.0\.5/);
    const allowed = await findRunningService({ adminClient: { url: 'https://10.0.0.5:8081', token: TOKEN }, dataDir: '/nonexistent' });
    expect(allowed).toMatchObject({ url: 'https://10.0.0.5:8081', via: 'ADMIN_URL' });
    expect(sent).toBe(0);
  } finally {
    global.fetch = realFetch;
  }
});
