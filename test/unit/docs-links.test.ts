import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The README is a map of docs/, and the pages link to one another and to each other's sections. Pages are
 * split, renamed and retitled; a link that no longer resolves sends a newcomer nowhere. This checks every
 * relative link and `#anchor` of README.md and docs/*.md the way GitHub resolves them, and that the map
 * names every page.
 */
const ROOT = path.resolve(__dirname, '../..');

/** Lines outside fenced code blocks, with their line numbers: a `#` or `[x](y)` inside a fence is code. */
function prose(text: string): Array<{ line: number; text: string }> {
  const out: Array<{ line: number; text: string }> = [];
  let fence: string | null = null;
  text.split('\n').forEach((raw, i) => {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(raw);
    if (opener) {
      if (fence === null) fence = opener[1][0].repeat(opener[1].length);
      else if (raw.trim().startsWith(fence)) fence = null;
      return;
    }
    if (fence === null) out.push({ line: i + 1, text: raw });
  });
  return out;
}

/** GitHub's heading anchor: the rendered text, lower-cased, without punctuation, spaces as hyphens. */
export function slug(heading: string): string {
  const rendered = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1') // a link renders as its text
    .replace(/`/g, '')
    .replace(/(\*\*|__|\*)/g, '');
  return rendered.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** Every anchor a page offers: its headings' slugs, repeats numbered as GitHub numbers them. */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const { text: line } of prose(text)) {
    const h = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = slug(h[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

export interface Link { file: string; line: number; target: string }

export function linksOf(file: string, text: string): Link[] {
  const links: Link[] = [];
  for (const { line, text: raw } of prose(text)) {
    const outsideCode = raw.replace(/`[^`]*`/g, '');
    for (const m of outsideCode.matchAll(/\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ file, line, target: m[1] });
  }
  return links;
}

/** What is wrong with a link, or null when it resolves. `read` gives a file's text (tests feed their own). */
export function problemOf(link: Link, read: (file: string) => string | null, isDirectory: (p: string) => boolean): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) return null; // http:, https:, mailto: are not ours to check
  const [pathPart, anchor] = link.target.split('#', 2) as [string, string | undefined];
  const target = pathPart === '' ? link.file : path.normalize(path.join(path.dirname(link.file), decodeURIComponent(pathPart)));
  if (target.startsWith('..')) return `${link.target}: leaves the repository`;
  if (isDirectory(target)) return anchor === undefined ? null : `${link.target}: an anchor on a folder`;
  const text = read(target);
  if (text === null) return `${link.target}: no file ${target}`;
  if (anchor === undefined) return null;
  if (!target.endsWith('.md')) return `${link.target}: an anchor on a file that is not Markdown`;
  return anchorsOf(text).has(anchor.toLowerCase()) ? null : `${link.target}: ${target} has no heading with the anchor #${anchor}`;
}

const pages = ['README.md', ...readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
const readRepo = (file: string) => (existsSync(path.join(ROOT, file)) && statSync(path.join(ROOT, file)).isFile() ? readFileSync(path.join(ROOT, file), 'utf8') : null);
const isRepoDirectory = (p: string) => existsSync(path.join(ROOT, p)) && statSync(path.join(ROOT, p)).isDirectory();

describe('the checker', () => {
  test('anchors are GitHub\'s: code, links and punctuation dropped, repeats numbered, fenced lines ignored', () => {
    expect(slug('Supported Node.js versions')).toBe('supported-nodejs-versions');
    expect(slug('The `ingress` command')).toBe('the-ingress-command');
    expect(slug('Production: Kafka, Azure Blob Storage and Cosmos DB, several processes')).toBe('production-kafka-azure-blob-storage-and-cosmos-db-several-processes');
    expect(slug('[Kafka](kafka.md) in production')).toBe('kafka-in-production');
    expect(slug('Who the caller is: `trustedProxyHops`')).toBe('who-the-caller-is-trustedproxyhops');
    expect([...anchorsOf('# Logs\n\n## Logs\n\n```sh\n# not a heading\n```\n### Logs ###\n')]).toEqual(['logs', 'logs-1', 'logs-2']);
  });

  test('a missing file, a missing anchor and a link out of the repository are each reported; links in code are not links', () => {
    const files: Record<string, string> = {
      'docs/a.md': '# A\n\n## Known section\n\n[ok](b.md#b) [self](#known-section) [web](https://example.com/x#y)\n`[not](a-link.md)`\n```\n[nor](this.md)\n```\n[gone](c.md) [bad anchor](b.md#nowhere) [out](../../etc/passwd)\n',
      'docs/b.md': '# B\n',
    };
    const read = (f: string) => files[f] ?? null;
    const problems = linksOf('docs/a.md', files['docs/a.md']).map((l) => problemOf(l, read, () => false)).filter((p) => p !== null);
    expect(problems).toEqual([
      'c.md: no file docs/c.md',
      'b.md#nowhere: docs/b.md has no heading with the anchor #nowhere',
      '../../etc/passwd: leaves the repository',
    ]);
  });
});

describe('README.md and docs/*.md', () => {
  test('every relative link and #anchor resolves', () => {
    const problems = pages.flatMap((file) =>
      linksOf(file, readRepo(file) ?? '').flatMap((link) => {
        const problem = problemOf(link, readRepo, isRepoDirectory);
        return problem === null ? [] : [`${link.file}:${link.line} ${problem}`];
      }));
    expect(problems).toEqual([]);
  });

  test('the pages do link to each other (the check above has something to check)', () => {
    const relative = pages.flatMap((file) => linksOf(file, readRepo(file) ?? '')).filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l.target));
    expect(relative.length).toBeGreaterThan(50);
    expect(relative.filter((l) => l.target.includes('#')).length).toBeGreaterThan(20);
  });

  test('the README\'s map links every page under docs/', () => {
    const linked = new Set(linksOf('README.md', readRepo('README.md') ?? '').map((l) => l.target.split('#')[0]));
    expect(pages.filter((p) => p !== 'README.md' && !linked.has(p))).toEqual([]);
  });
});
