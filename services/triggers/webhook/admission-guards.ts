import type { WorkflowNode } from '../../platform/registry/documents';
import { errorAnswer, type Answer } from '../answers';
import { createRateLimiter, type RateLimit, type RateLimiter } from '../rate-limiter';
import type { Admission, InboundRequest, TriggerPlugin } from '../trigger';
import { admissionOptions, guardProblems } from './admission-options';
import { clientAddress } from './ip-allow-list';

/**
 * Who may call a webhook and how often, judged on the headers before anything else (the body is not read):
 * the IP allow-list first, then the workflow's rate limit, then the node's own admission (bots,
 * authentication), then the rate limit of the principal that authentication found.
 *
 * The workflow bucket is taken before authentication so that a flood is refused before it costs a
 * credential look-up or a comparison; it therefore counts every request that passed the allow-list,
 * authenticated or not.
 */
export interface AdmissionGuardMetrics {
  rateLimited(workflowId: string): void;
  ipNotAllowed(workflowId: string): void;
}

export interface AdmissionGuards {
  /** `next` is the node's own admission; it runs only when the request got past the allow-list and the workflow's bucket. */
  admit(request: InboundRequest, node: WorkflowNode, next: () => Admission | Promise<Admission>): Admission | Promise<Admission>;
}

export interface AdmissionGuardDeps {
  /** One per receiver process; its buckets are this process's alone (docs/webhook-admission.md, "Several receivers"). */
  limiter: RateLimiter;
  metrics?: AdmissionGuardMetrics;
}

const refused = (answer: Answer): Admission => ({ ok: false, answer });

function rateLimited(retryAfterSeconds: number): Admission {
  return refused(errorAnswer('rate-limited', `Too many requests; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }));
}

export function createAdmissionGuards(deps: AdmissionGuardDeps): AdmissionGuards {
  const { limiter, metrics } = deps;

  function take(key: string, limit: RateLimit, workflowId: string): Admission | null {
    const taken = limiter.take(key, limit);
    if (taken.ok) return null;
    metrics?.rateLimited(workflowId);
    return rateLimited(taken.retryAfterSeconds);
  }

  /** After the node's admission: the principal's bucket, and the caller's address for the received record. */
  function completed(admission: Admission, request: InboundRequest, limit: RateLimit | null, address: string | undefined): Admission {
    if (!admission.ok) return admission;
    if (limit && admission.principal !== null) {
      // A NUL cannot occur in a workflow id, so no workflow's key collides with another's principal key.
      const refusal = take(`${request.workflowId}\u0000${admission.principal}`, limit, request.workflowId);
      if (refusal) return refusal;
    }
    return address === undefined ? admission : { ...admission, remoteAddress: address };
  }

  return {
    admit(request, node, next) {
      const options = admissionOptions(node);
      if (options.allowList === null && options.rateLimit === null && options.trustedProxyHops === 0) return next();
      // Behind trusted proxies the caller is the address they report, and that is what the record keeps;
      // when they report none it keeps the socket peer (the nearest proxy), as with no proxies configured.
      const address = options.trustedProxyHops === 0 ? undefined : clientAddress(request.remoteAddress, request.headers['x-forwarded-for'], options.trustedProxyHops);
      if (options.allowList && !options.allowList.allows(address === undefined ? request.remoteAddress : address)) {
        metrics?.ipNotAllowed(request.workflowId);
        return refused(errorAnswer('ip-not-allowed'));
      }
      const recorded = address ?? undefined;
      if (options.rateLimit) {
        const refusal = take(request.workflowId, options.rateLimit, request.workflowId);
        if (refusal) return refusal;
      }
      const admitting = next();
      return admitting instanceof Promise
        ? admitting.then((admission) => completed(admission, request, options.principalRateLimit, recorded))
        : completed(admitting, request, options.principalRateLimit, recorded);
    },
  };
}

/**
 * The same guards before another plugin's own admission, for a webhook node that plugin serves: Protocol AS2,
 * whose partners are as often pinned to addresses as any webhook sender. `workflows put` checks the options there too.
 */
export function withAdmissionGuards(plugin: TriggerPlugin, guards: AdmissionGuards): TriggerPlugin {
  return {
    ...plugin,
    admit: (request, node, services) => guards.admit(request, node, () => plugin.admit(request, node, services)),
    validateNode: (node) => [...(plugin.validateNode?.(node) ?? []), ...guardProblems(node, `node "${node.name}"`)],
  };
}

/** Guards with a limiter of their own, for a trigger built without one (tests, `workflows put`). */
export const standaloneAdmissionGuards = (): AdmissionGuards => createAdmissionGuards({ limiter: createRateLimiter() });
