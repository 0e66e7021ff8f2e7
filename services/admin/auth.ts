import type { NextFunction, Request, Response } from 'express';
import type { AdminScope, AdminToken } from '../platform/config/admin-settings';
import { secretsEqual } from '../triggers/secret-compare';
import { AdminError } from './errors';

/**
 * Bearer admin tokens (ADMIN_TOKENS, and the service's own token for the local CLI: local-access.ts).
 *
 * The presented token is compared with every configured one, each in constant time (secret-compare.ts), and
 * the loop never stops early: how long the check takes says nothing about which token nearly matched, or
 * where. A token appears in no log line and no answer; the caller's token *name* is what logs carry.
 *
 * `read` allows GET and HEAD (the live tail included); `full` allows everything.
 */
export interface AdminCaller {
  name: string;
  scope: AdminScope;
}

export function matchToken(presented: string, tokens: readonly AdminToken[]): AdminCaller | null {
  let found: AdminToken | null = null;
  for (const t of tokens) {
    const equal = secretsEqual(presented, t.token);
    if (equal && found === null) found = t;
  }
  return found ? { name: found.name, scope: found.scope } : null;
}

const BEARER = /^Bearer +([^\s]+) *$/i;

export function requireAdminToken(tokens: () => readonly AdminToken[], configured: () => boolean) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const header = req.headers.authorization;
    const challenge = { 'www-authenticate': 'Bearer realm="ingress-admin"' };
    // Without ADMIN_TOKENS only the local CLI's token can match: everyone else is told what to configure.
    const unconfigured = () => new AdminError('authorization-required', 'No admin tokens are configured: set ADMIN_TOKENS (name:scope:token,…) on the service to use the management API (docs/management-api.md)', undefined, challenge);
    if (header === undefined || header === '') throw configured() ? new AdminError('authorization-required', undefined, undefined, challenge) : unconfigured();
    const m = BEARER.exec(header);
    if (!m) throw new AdminError('authorization-required', 'The Authorization header must be "Bearer <token>"', undefined, challenge);
    const caller = matchToken(m[1], tokens());
    if (!caller) throw configured() ? new AdminError('authorization-wrong') : unconfigured();
    if (caller.scope !== 'full' && req.method !== 'GET' && req.method !== 'HEAD') throw new AdminError('scope-insufficient');
    res.locals.caller = caller;
    next();
  };
}
