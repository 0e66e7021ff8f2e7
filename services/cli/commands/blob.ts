import { pipeline } from 'node:stream/promises';
import { allowOnly, UsageError, type ParsedArgs } from '../args';
import type { CommandContext } from '../context';

export const BLOB_USAGE = 'ingress blob get PATH | list PREFIX  (writes the object, or the paths under PREFIX one a line, to standard output)';

export async function blobCommand(args: ParsedArgs, ctx: CommandContext, stdout: NodeJS.WritableStream = process.stdout): Promise<number> {
  allowOnly(args, []);
  const [verb, path] = args.positionals;
  if ((verb !== 'get' && verb !== 'list') || !path) throw new UsageError(`usage: ${BLOB_USAGE}`);
  const store = await ctx.openStore();
  try {
    if (verb === 'list') {
      for await (const found of store.list(path)) {
        // Wait for each line to be taken: the command exits right after, and a pipe drops what it still holds.
        await new Promise<void>((resolve, reject) => stdout.write(`${found}\n`, (error) => (error ? reject(error) : resolve())));
      }
      return 0;
    }
    const head = await store.head(path);
    if (!head) { ctx.err(`no object at ${path}`); return 1; }
    await pipeline(await store.get(path), stdout, { end: false });
    return 0;
  } finally {
    await store.close();
  }
}
