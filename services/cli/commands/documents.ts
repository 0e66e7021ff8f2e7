import { promises as fsp } from 'node:fs';
import { DocumentError, parseCredentialDocument, parseWorkflowDocument } from '../../platform/registry/documents';
import type { Registry } from '../../platform/registry/registry';
import { credentialCertificates, holdsCertificates } from '../../platform/registry/certificate-facts';
import type { CredentialSealer } from '../../platform/registry/credential-crypto';
import { allowOnly, UsageError, type ParsedArgs } from '../args';
import { triggerCatalog } from '../start';
import type { CommandContext } from '../context';

export const WORKFLOWS_USAGE = 'ingress workflows put FILE | get ID | list';
export const CREDENTIALS_USAGE = 'ingress credentials put FILE | list';

async function readJsonFile(file: string): Promise<unknown> {
  let text: string;
  try { text = file === '-' ? await readStdin() : await fsp.readFile(file, 'utf8'); } catch (error) {
    throw new UsageError(`cannot read ${file}: ${(error as Error).message}`);
  }
  try { return JSON.parse(text); } catch (error) {
    throw new UsageError(`${file} is not valid JSON: ${(error as Error).message}`);
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Open the registry for one command, report document problems one per line, always close. */
async function withRegistry(ctx: CommandContext, what: string, run: (registry: Registry) => Promise<number>): Promise<number> {
  const registry = await ctx.openRegistry();
  try {
    return await run(registry);
  } catch (error) {
    if (error instanceof DocumentError) { ctx.err(`invalid ${what} document:\n${error.problems.map((p) => `  ${p}`).join('\n')}`); return 1; }
    throw error;
  } finally {
    await registry.close();
  }
}

export async function workflowsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, []);
  const [verb, arg] = args.positionals;
  const hookUrl = (id: string) => `${ctx.config.publicBaseUrl}/hook/${encodeURIComponent(id)}`;
  return withRegistry(ctx, 'workflow', async (registry) => {
    switch (verb) {
      case 'put': {
        if (!arg) throw new UsageError(`usage: ${WORKFLOWS_USAGE}`);
        const doc = parseWorkflowDocument(await readJsonFile(arg));
        const problems = triggerCatalog(ctx.config).validate(doc);
        if (problems.length) throw new DocumentError(problems);
        await registry.workflows.put(doc);
        ctx.out(JSON.stringify({ id: doc.id, active: doc.active, url: hookUrl(doc.id) }));
        return 0;
      }
      case 'get': {
        if (!arg) throw new UsageError(`usage: ${WORKFLOWS_USAGE}`);
        const doc = await registry.workflows.get(arg);
        if (!doc) { ctx.err(`no workflow ${arg}`); return 1; }
        ctx.out(JSON.stringify(doc, null, 2));
        return 0;
      }
      case 'list':
        for (const w of await registry.workflows.list()) ctx.out(JSON.stringify({ id: w.id, name: w.name ?? null, active: w.active, url: hookUrl(w.id) }));
        return 0;
      default:
        throw new UsageError(`usage: ${WORKFLOWS_USAGE}`);
    }
  });
}

export async function credentialsCommand(args: ParsedArgs, ctx: CommandContext): Promise<number> {
  allowOnly(args, []);
  const [verb, arg] = args.positionals;
  return withRegistry(ctx, 'credential', async (registry) => {
    switch (verb) {
      case 'put': {
        if (!arg) throw new UsageError(`usage: ${CREDENTIALS_USAGE}`);
        const doc = parseCredentialDocument(await readJsonFile(arg));
        await registry.credentials.put(ctx.sealer().seal(doc));
        ctx.out(JSON.stringify({ id: doc.id, type: doc.type }));
        return 0;
      }
      case 'list': {
        // Ids and types, and for credentials holding certificates each certificate's public facts
        // (certificate-facts.ts): secrets and private keys never leave the registry through the CLI.
        let sealer: CredentialSealer | null | undefined;
        const now = Date.now();
        for (const c of await registry.credentials.list()) {
          const line: Record<string, unknown> = { id: c.id, name: c.name ?? null, type: c.type, updatedAt: c.updatedAt };
          if (holdsCertificates(c.type)) {
            if (sealer === undefined) { try { sealer = ctx.sealer(); } catch { sealer = null; } }
            if (!sealer) line.certificatesError = 'INGRESS_ENCRYPTION_KEY is not set, so the certificates cannot be read';
            else {
              try { line.certificates = credentialCertificates(sealer.open(c), now); } catch (error) { line.certificatesError = (error as Error).message; }
            }
          }
          ctx.out(JSON.stringify(line));
        }
        return 0;
      }
      default:
        throw new UsageError(`usage: ${CREDENTIALS_USAGE}`);
    }
  });
}
