import type { WorkflowNode } from '../../platform/registry/documents';
import type { RateLimit } from '../rate-limiter';
import { compileAllowList, parseCidr, type AllowList } from './ip-allow-list';

/**
 * A webhook node's admission options: who may call (`ipAllowList`, `trustedProxyHops`) and how often
 * (`rateLimit`). They live in `parameters.options` like the node's other options; the same names directly
 * in `parameters` are read when `options` does not have them, so a document written either way works.
 */
export interface AdmissionOptions {
  /** null: no restriction (the option absent or empty). */
  allowList: AllowList | null;
  trustedProxyHops: number;
  /** Per workflow; null: unlimited. */
  rateLimit: RateLimit | null;
  /** Per workflow and authenticated principal; null when there is no rate limit. */
  principalRateLimit: RateLimit | null;
}

export const NO_ADMISSION_OPTIONS: AdmissionOptions = Object.freeze({ allowList: null, trustedProxyHops: 0, rateLimit: null, principalRateLimit: null });

const NAMES = ['ipAllowList', 'trustedProxyHops', 'rateLimit'] as const;
type Name = (typeof NAMES)[number];

/** Each option from `parameters.options`, else from `parameters`, with where it was found (for messages). */
function rawOptions(node: WorkflowNode): Partial<Record<Name, { value: unknown; path: string }>> {
  const p = (node.parameters ?? {}) as Record<string, unknown>;
  const o = (typeof p.options === 'object' && p.options !== null ? p.options : {}) as Record<string, unknown>;
  const found: Partial<Record<Name, { value: unknown; path: string }>> = {};
  for (const name of NAMES) {
    if (o[name] !== undefined && o[name] !== null) found[name] = { value: o[name], path: `parameters.options.${name}` };
    else if (p[name] !== undefined && p[name] !== null) found[name] = { value: p[name], path: `parameters.${name}` };
  }
  return found;
}

const isPositive = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value) && value > 0;

function asLimit(value: unknown): RateLimit | null {
  if (typeof value !== 'object' || value === null) return null;
  const { perSecond, burst } = value as Record<string, unknown>;
  return isPositive(perSecond) && isPositive(burst) && burst >= 1 ? { perSecond, burst } : null;
}

const cache = new WeakMap<WorkflowNode, AdmissionOptions>();

/**
 * The options as the receiver applies them. A node stored with a value `workflows put` would refuse fails
 * closed where that matters: an unreadable allow-list allows nobody, unreadable hops trust no proxy. An
 * unreadable rate limit limits nothing (refusing everyone would turn a typo into an outage).
 */
export function admissionOptions(node: WorkflowNode): AdmissionOptions {
  const hit = cache.get(node);
  if (hit) return hit;
  const raw = rawOptions(node);
  let options: AdmissionOptions = NO_ADMISSION_OPTIONS;
  if (raw.ipAllowList || raw.trustedProxyHops || raw.rateLimit) {
    const list = raw.ipAllowList?.value;
    const entries = Array.isArray(list) ? list : list === undefined ? [] : [null];
    const hops = raw.trustedProxyHops?.value ?? 0;
    const rateLimit = asLimit(raw.rateLimit?.value);
    const perPrincipal = rateLimit ? asLimit((raw.rateLimit!.value as Record<string, unknown>).perPrincipal) : null;
    options = {
      // An empty list (which `workflows put` refuses) allows nobody, like an unreadable one: emptying it never opens the hook.
      allowList: raw.ipAllowList === undefined ? null : compileAllowList(entries.filter((e): e is string => typeof e === 'string')),
      trustedProxyHops: Number.isSafeInteger(hops) && (hops as number) >= 0 ? (hops as number) : 0,
      rateLimit,
      principalRateLimit: rateLimit ? perPrincipal ?? rateLimit : null,
    };
  }
  cache.set(node, options);
  return options;
}

function limitProblems(value: unknown, path: string): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${path} must be an object {"perSecond": number, "burst": number}`];
  const { perSecond, burst } = value as Record<string, unknown>;
  const problems: string[] = [];
  if (!isPositive(perSecond)) problems.push(`${path}.perSecond must be a positive number (requests per second; 0.5 is one every two seconds), not ${JSON.stringify(perSecond)}`);
  if (!isPositive(burst) || burst < 1) problems.push(`${path}.burst must be a number of at least 1 (requests allowed at once), not ${JSON.stringify(burst)}`);
  return problems;
}

/** Problems with the admission options, for `workflows put`; `at` names the node. */
export function guardProblems(node: WorkflowNode, at: string): string[] {
  const raw = rawOptions(node);
  const problems: string[] = [];
  if (raw.ipAllowList) {
    const { value, path } = raw.ipAllowList;
    if (!Array.isArray(value)) problems.push(`${at}.${path} must be a list of CIDR ranges such as "203.0.113.0/24" or "2001:db8::/32"`);
    else if (value.length === 0) problems.push(`${at}.${path} is empty, which would allow nobody: name at least one range, or remove the option to allow every address`);
    else value.forEach((entry, i) => {
      if (typeof entry !== 'string' || !parseCidr(entry)) problems.push(`${at}.${path}[${i}] ${JSON.stringify(entry)} is not an IPv4 or IPv6 address or CIDR range (such as "203.0.113.0/24" or "2001:db8::/32")`);
    });
  }
  if (raw.trustedProxyHops) {
    const { value, path } = raw.trustedProxyHops;
    if (!(Number.isSafeInteger(value) && (value as number) >= 0)) problems.push(`${at}.${path} must be a whole number of proxies of at least 0, not ${JSON.stringify(value)}`);
  }
  if (raw.rateLimit) {
    const { value, path } = raw.rateLimit;
    problems.push(...limitProblems(value, `${at}.${path}`));
    const perPrincipal = (value as Record<string, unknown> | null)?.perPrincipal;
    if (perPrincipal !== undefined && perPrincipal !== null) problems.push(...limitProblems(perPrincipal, `${at}.${path}.perPrincipal`));
  }
  return problems;
}
