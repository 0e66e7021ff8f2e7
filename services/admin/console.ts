import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import type { Request, Response, NextFunction } from 'express';

/**
 * The operator console (docs/management-api.md#console): a static page, one ES module and a stylesheet, served
 * at /console/ on the admin port without authentication. It holds no data: the browser asks the API for
 * everything with the admin token the operator types in.
 *
 * Only the files named in CONSOLE_FILES are served, looked up by their exact name: no directory listing, no
 * path from the request ever reaches the file system, so nothing outside the folder can be asked for.
 * The folder sits beside this module: in the TypeScript sources (tests) and, copied by `npm run build`
 * (infra/build/copy-console.js), under dist/.
 */
export const CONSOLE_DIR = path.join(__dirname, 'console');

const CONSOLE_FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/** The page runs only its own script and stylesheet and talks only to this origin; data can never become markup. */
export const CONSOLE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-cache',
};

/** Express middleware for /console: the redirect to /console/, the allowed files, and 404 for anything else. */
export function consoleRoutes(dir: string = CONSOLE_DIR) {
  // Read once: a handful of small files, and a missing one is said at the first request, not at each.
  let files: Map<string, { type: string; body: Buffer }> | Error | null = null;
  const load = () => {
    if (files === null) {
      try {
        files = new Map(Object.entries(CONSOLE_FILES).map(([name, type]) => [name, { type, body: readFileSync(path.join(dir, name)) }]));
      } catch (error) {
        files = new Error(`the console's files are missing under ${dir} (npm run build copies them): ${(error as Error).message}`);
      }
    }
    return files;
  };

  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    const rawPath = req.originalUrl.split('?')[0];
    res.set(SECURITY_HEADERS);
    if (rawPath === '/console') {
      res.redirect(301, '/console/');
      return;
    }
    const name = rawPath === '/console/' ? 'index.html' : rawPath.slice('/console/'.length);
    const loaded = load();
    if (loaded instanceof Error) {
      res.status(500).type('text/plain').send(`${loaded.message}\n`);
      return;
    }
    const file = loaded.get(name);
    if (!file) {
      res.status(404).type('text/plain').send('Not found\n');
      return;
    }
    res.status(200).set('content-type', file.type).send(file.body);
  };
}
