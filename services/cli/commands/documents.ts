import { promises as fsp } from 'node:fs';
import { hookBaseUrl } from '../../platform/config/config';
import { DocumentError, parseCredentialDocument, parseWorkflowDocument } from '../../platform/registry/documents';
import type { Registry } from '../../platform/registry/registry';
import type { CredentialSealer } from '../../platform/registry/credential-crypto';
import { checkCredentialDocument, checkWorkflowDocument, credentialMetadata, hookUrl, putCredential, resealCredentials, type ResealOutcome } from '../../admin/operations/documents';
import { allowOnly, switchFlag, UsageError, type ParsedArgs } from '../args';
import { parseJsonText } from '../json-text';
import { triggerCatalog } from '../start';
import type { CommandContext } from '../context';
import { putThroughApi, refusal } from './through-api';

export const WORKFLOWS_USAGE = 'ingress workflows put FILE | get ID | list';
export const CREDENTIALS_USAGE = 'ingress credentials put FILE [--forget-retired] | list | reseal';

async function readJsonFile(file: string): Promise<unknown> {
  let text: string;
  try { text = file === '-' ? await readStdin() : await fsp.readFile(file, 'utf8'); } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  return parseJsonText(text, file);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Report document problems one per line (exit 1). */
async function reportingProblems(ctx: CommandContext, what: string, run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof DocumentError) { ctx.err(`invalid ${what} document:\n${error.problems.map((p) => `  ${p}`).join('\n')}`); return 1; }
    throw error;
  }
}

/** Open the registry for one command, report document problems one per line, always close. */
async function withRegistry(ctx: CommandContext, what: string, run: (registry: Registry) => Promise<number>): Promise<number> {
  const registry = await ctx.openRegistry();
  try {
    return await reportingProblems(ctx, what, () => run(registry));
  } finally {
    await registry.close();
  }
}

export async function workflowsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, []);
  const [verb, arg] = args.positionals;
  // No receiver listens in this process: with PORT=0 and no PUBLIC_BASE_URL the hook URL is not known here (null).
  let base = hookBaseUrl(ctx.config, null);
  const url = (id: string) => hookUrl(base, id);
  if (verb === 'put') {
    if (!arg) throw new UsageError(`usage: ${WORKFLOWS_USAGE}`);
    const input = await readJsonFile(arg);
    // While a service runs, it stores the document (and validates it, as below).
    const api = await ctx.runningService();
    if (api) {
      return reportingProblems(ctx, 'workflow', async () => {
        const doc = parseWorkflowDocument(input);
        // The service's URL: its PUBLIC_BASE_URL is what partners reach, not this shell's.
        return putThroughApi(ctx, api, 'workflow', `/api/v1/workflows/${encodeURIComponent(doc.id)}`, doc, (w) => ({ id: w.id, active: w.active, url: w.url }));
      });
    }
    return withRegistry(ctx, 'workflow', async (registry) => {
      const doc = checkWorkflowDocument(input, triggerCatalog(ctx.config));
      await registry.workflows.put(doc);
      ctx.out(JSON.stringify({ id: doc.id, active: doc.active, url: url(doc.id) }));
      return 0;
    });
  }
  // A service running on this DATA_DIR says where its hooks are: its PUBLIC_BASE_URL and port, not this shell's.
  const service = verb === 'list' ? await ctx.runningService() : null;
  if (service?.hookBaseUrl !== undefined) base = service.hookBaseUrl;
  return withRegistry(ctx, 'workflow', async (registry) => {
    switch (verb) {
      case 'get': {
        if (!arg) throw new UsageError(`usage: ${WORKFLOWS_USAGE}`);
        const doc = await registry.workflows.get(arg);
        if (!doc) { ctx.err(`no workflow ${arg}`); return 1; }
        ctx.out(JSON.stringify(doc, null, 2));
        return 0;
      }
      case 'list':
        for (const w of await registry.workflows.list()) ctx.out(JSON.stringify({ id: w.id, name: w.name ?? null, active: w.active, url: url(w.id) }));
        return 0;
      default:
        throw new UsageError(`usage: ${WORKFLOWS_USAGE}`);
    }
  });
}

export async function credentialsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const [verb, arg] = args.positionals;
  allowOnly(args, verb === 'put' ? ['forget-retired'] : []);
  if (verb === 'put') {
    if (!arg) throw new UsageError(`usage: ${CREDENTIALS_USAGE}`);
    const forgetRetired = switchFlag(args, 'forget-retired');
    const input = await readJsonFile(arg);
    // While a service runs, it seals and stores the credential with its own INGRESS_ENCRYPTION_KEY.
    const api = await ctx.runningService();
    if (api) {
      return reportingProblems(ctx, 'credential', async () => {
        const doc = parseCredentialDocument(input);
        return putThroughApi(ctx, api, 'credential', `/api/v1/credentials/${encodeURIComponent(doc.id)}${forgetRetired ? '?forgetRetired=true' : ''}`, doc, (c) => ({ id: c.id, type: c.type }));
      });
    }
    return withRegistry(ctx, 'credential', async (registry) => {
      const now = Date.now();
      const doc = checkCredentialDocument(input, now);
      const sealer = ctx.sealer();
      const put = await putCredential(registry, doc, sealer, forgetRetired, now);
      if ('conflict' in put) throw new DocumentError([put.conflict]);
      if ('problems' in put) throw new DocumentError(put.problems);
      ctx.out(JSON.stringify({ id: doc.id, type: doc.type }));
      return 0;
    });
  }
  if (verb === 'reseal') {
    if (arg) throw new UsageError(`usage: ${CREDENTIALS_USAGE}`);
    // While a service runs, it reseals with its own keys: the ones it opens credentials with.
    const api = await ctx.runningService();
    if (api) {
      const answer = await api.request('POST', '/api/v1/credentials/reseal');
      if (answer.status !== 200) throw refusal(api, answer, 'it');
      return reportReseal(ctx, answer.body as ResealOutcome);
    }
    return withRegistry(ctx, 'credential', async (registry) => reportReseal(ctx, await resealCredentials(registry, ctx.sealer())));
  }
  return withRegistry(ctx, 'credential', async (registry) => {
    switch (verb) {
      case 'list': {
        // Ids and types, and for credentials holding certificates each certificate's public facts
        // (admin/operations/documents.ts): secrets and private keys never leave the registry through the CLI.
        let sealer: CredentialSealer | null | undefined;
        const now = Date.now();
        for (const c of await registry.credentials.list()) {
          if (sealer === undefined) { try { sealer = ctx.sealer(); } catch { sealer = null; } }
          ctx.out(JSON.stringify(credentialMetadata(c, sealer, now)));
        }
        return 0;
      }
      default:
        throw new UsageError(`usage: ${CREDENTIALS_USAGE}`);
    }
  });
}

/** One JSON line; exit 1, naming them, when some credential opens with neither key. */
function reportReseal(ctx: CommandContext, outcome: ResealOutcome): number {
  ctx.out(JSON.stringify(outcome));
  if (outcome.unreadable.length === 0) return 0;
  ctx.err(`credential(s) ${outcome.unreadable.join(', ')} open with neither INGRESS_ENCRYPTION_KEY nor INGRESS_ENCRYPTION_KEY_PREVIOUS: set the key they were sealed with as INGRESS_ENCRYPTION_KEY_PREVIOUS and run this again, or put each again`);
  return 1;
}
