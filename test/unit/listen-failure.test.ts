import { ConfigError } from '../../services/platform/config/config';
import { listenFailure } from '../../services/platform/health/admin-server';

/** What a failed listen is reported as: the variable to change, and whether it is a bad value (exit 78). */
const at = { portVariable: 'PORT', hostVariable: 'HOST', port: 8080, host: 'nowhere.invalid' };
const failure = (code: string) => listenFailure(Object.assign(new Error(`listen ${code}`), { code }), at);

test.each(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME'])('%s: the host names no address; a bad value naming HOST', (code) => {
  const error = failure(code);
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).problems).toEqual([expect.stringMatching(/^HOST=nowhere\.invalid: no address is known for this name/)]);
});

test('EADDRNOTAVAIL is a bad HOST; EADDRINUSE and EACCES name the port but are no bad value; anything else is itself', () => {
  expect((failure('EADDRNOTAVAIL') as ConfigError).problems).toEqual(['HOST=nowhere.invalid: not an address of this machine']);
  for (const code of ['EADDRINUSE', 'EACCES']) {
    expect(failure(code)).not.toBeInstanceOf(ConfigError);
    expect(failure(code).message).toMatch(/^PORT=8080: /);
  }
  const other = Object.assign(new Error('boom'), { code: 'EMFILE' });
  expect(listenFailure(other, at)).toBe(other);
});
