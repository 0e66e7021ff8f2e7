import { parseJsonText } from '../../services/cli/json-text';
import { MAX_JSON_DEPTH } from '../../services/triggers/json-depth';

const refusal = (text: string) => { try { parseJsonText(text, 'cred.json'); } catch (error) { return (error as Error).message; } return null; };

test('a document file that is not JSON is refused by line and column, never quoting the text around the fault', () => {
  // V8's message for these quoted `..."password":TOPSECRETP"...` and `"secrets":['TOPSECRET-HMAC-KEY'`.
  expect(refusal('{"id":"c-leak","type":"basicAuth","data":{"user":"u","password":TOPSECRETPW}}')).toBe('cred.json is not valid JSON: a syntax error at line 1, column 65');
  expect(refusal('{"id":"c","type":"hmac",\n  "data":{"secrets":[\'TOPSECRET-HMAC-KEY\'],"header":"X-Sig"}}')).toBe('cred.json is not valid JSON: a syntax error at line 2, column 22');
  expect(refusal('TOPSECRET')).toBe('cred.json is not valid JSON: a syntax error at line 1, column 1');
  expect(refusal('{"data":{"value":"TOPSECRET')).toBe('cred.json is not valid JSON: a syntax error at line 1, column 18');
  expect(refusal('{"data":{"value":"é"} x')).toBe('cred.json is not valid JSON: a syntax error at line 1, column 23');
  expect(refusal('{"data":{"value":"TOPSECRET"}')).toBe('cred.json is not valid JSON: it ends early');
  expect(refusal('')).toBe('cred.json is not valid JSON: it ends early');
  expect(parseJsonText('{"a":[1,"x"]}\n', 'cred.json')).toEqual({ a: [1, 'x'] });
});

test(`a document nested more than ${MAX_JSON_DEPTH} levels deep is refused before anything recurses into it`, () => {
  expect(refusal(`{"data":${'{"a":'.repeat(20_000)}null${'}'.repeat(20_000)}}`)).toBe(`cred.json holds JSON nested more than ${MAX_JSON_DEPTH} levels deep (at line 1, column ${9 + 5 * (MAX_JSON_DEPTH - 1)})`);
  expect(refusal(`${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}`)).toBeNull();
});
