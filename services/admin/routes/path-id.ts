import { DocumentError, documentIdProblem } from '../../platform/registry/documents';
import { AdminError } from '../errors';

/**
 * A document put at its id's path, checked with every problem listed (the rule for every bad input): the path's id
 * first, named as the path's (a `..` as a dot segment), then the body's. A body without an id takes the path's; the
 * problem of an id it took from a bad path is not named twice, and the body's id is compared with the path's only
 * when the path's is sound (a `..` in the path is its problem, not a difference): a difference is listed first,
 * with the body's other problems.
 */
export function checkedAtPath<T extends { id: string }>(pathId: string, body: unknown, check: (body: unknown) => T, kind: 'workflow' | 'credential'): T {
  const pathProblem = documentIdProblem(pathId, 'the id in the path', kind);
  const tookPathId = body !== null && typeof body === 'object' && !Array.isArray(body) && (body as { id?: unknown }).id === undefined;
  if (tookPathId) (body as { id: string }).id = pathId;
  let doc: T | undefined;
  let problems: string[] = [];
  try { doc = check(body); } catch (error) {
    if (!(error instanceof DocumentError)) throw error;
    problems = error.problems;
  }
  if (pathProblem !== null) {
    const echoed = tookPathId ? documentIdProblem(pathId, '"id"', kind) : null;
    problems = [pathProblem, ...problems.filter((problem) => problem !== echoed)];
  } else {
    // Compared whether or not the body has other problems (the difference was named only once they were fixed),
    // but not for a body id with a problem of its own: that problem is listed, and is why it is no id to compare.
    const given = doc !== undefined ? doc.id : tookPathId || body === null || typeof body !== 'object' ? undefined : (body as { id?: unknown }).id;
    const comparable = typeof given === 'string' && (doc !== undefined || documentIdProblem(given, '"id"', kind) === null);
    if (comparable && given !== pathId) problems = [`"id" ${JSON.stringify(given)} differs from the id in the path ${JSON.stringify(pathId)}`, ...problems];
  }
  if (problems.length > 0 || doc === undefined) throw new AdminError('invalid-document', `The ${kind} document is not valid`, problems);
  return doc;
}
