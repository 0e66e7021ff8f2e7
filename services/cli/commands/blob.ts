import { pipeline } from 'node:stream/promises';
import { allowOnly, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';

export const BLOB_USAGE = 'ingress blob get PATH  (writes the object to standard output)';

export async function blobCommand(args: ParsedArgs, ctx: CommandContext, stdout: NodeJS.WritableStream = process.stdout): Promise<number> {
  allowOnly(args, []);
  const [verb, path] = args.positionals;
  if (verb !== 'get' || !path) throw new UsageError(`usage: ${BLOB_USAGE}`);
  const store = await ctx.openStore();
  try {
    const head = await store.head(path);
    if (!head) { ctx.err(`no object at ${path}`); return 1; }
    await pipeline(await store.get(path), stdout, { end: false });
    return 0;
  } finally {
    await store.close();
  }
}
