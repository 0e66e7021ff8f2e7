import { Router } from 'express';
import { DAY_MS, isReadable } from '../../platform/registry/certificate-facts';
import type { CredentialDocument } from '../../platform/registry/documents';
import { DOCUMENT_ID } from '../../platform/registry/registry';
import type { AdminApiDeps } from '../deps';
import { AdminError } from '../errors';
import { checkedAtPath } from './path-id';
import { checkCredentialDocument, credentialMetadata, putCredential, resealCredentials, workflowsUsingCredential } from '../operations/documents';
import { onlyQueries, queryString, queryWholeNumber } from './request-fields';
import { checkPreconditions, etagOf } from './preconditions';

/**
 * Credentials: metadata only (id, type, and the certificates' public facts, as `ingress credentials list`);
 * put seals the secrets with INGRESS_ENCRYPTION_KEY as the CLI does; delete refuses while a workflow names
 * the credential. No answer carries a secret or a private key, and no error quotes one. A credential read carries
 * an ETag (of its sealed form); put and delete honour If-Match and If-None-Match (preconditions.ts).
 */
export function credentialRoutes(deps: AdminApiDeps): Router {
  const router = Router();
  const now = () => deps.now?.() ?? Date.now();
  const sealer = () => {
    if (!deps.sealer) throw new AdminError('encryption-key-missing');
    return deps.sealer;
  };

  router.get('/credentials', async (_req, res) => {
    const at = now();
    res.json({ credentials: (await deps.registry.credentials.list()).map((c) => credentialMetadata(c, deps.sealer, at)) });
  });

  router.get('/credentials/:id', async (req, res) => {
    const stored = DOCUMENT_ID.test(req.params.id) ? await deps.registry.credentials.get(req.params.id) : null;
    if (!stored) throw new AdminError('not-found', `No credential ${JSON.stringify(req.params.id)}`);
    // The ETag is the stored version, for If-Match; the answer also says how many days each certificate has
    // left, which changes while the version does not: sent with end(), which answers no If-None-Match with 304.
    res.set('ETag', etagOf(stored)).type('json').end(JSON.stringify(credentialMetadata(stored, deps.sealer, now())));
  });

  // After INGRESS_ENCRYPTION_KEY was rotated: seal again under it what only INGRESS_ENCRYPTION_KEY_PREVIOUS opens.
  router.post('/credentials/reseal', async (_req, res) => {
    res.json(await resealCredentials(deps.registry, sealer()));
  });

  router.put('/credentials/:id', async (req, res) => {
    const doc: CredentialDocument = checkedAtPath(req.params.id, req.body as unknown, (body) => checkCredentialDocument(body, now()), 'credential');
    onlyQueries(req.query, ['forgetRetired']);
    const forgetRetired = queryString(req.query, 'forgetRetired');
    if (forgetRetired !== null && forgetRetired !== 'true' && forgetRetired !== 'false') throw new AdminError('invalid-request', 'forgetRetired takes true or false');
    const put = await putCredential(deps.registry, doc, sealer(), forgetRetired === 'true', now(), (before) => checkPreconditions(req, before, `Credential ${doc.id}`));
    if ('conflict' in put) throw new AdminError('conflict', put.conflict);
    if ('problems' in put) throw new AdminError('invalid-document', 'The credential document is not valid', put.problems);
    res.status(put.existed ? 200 : 201).set('ETag', etagOf(put.stored)).json(credentialMetadata(put.stored, deps.sealer, now()));
  });

  router.delete('/credentials/:id', async (req, res) => {
    const id = req.params.id;
    const stored = DOCUMENT_ID.test(id) ? await deps.registry.credentials.get(id) : null;
    if (!stored) throw new AdminError('not-found', `No credential ${JSON.stringify(id)}`);
    checkPreconditions(req, stored, `Credential ${id}`);
    const users = workflowsUsingCredential(await deps.registry.workflows.list(), id);
    if (users.length) throw new AdminError('conflict', `Credential ${id} is used by workflow(s) ${users.join(', ')}; change them first`);
    // Only the credential read above: one put since then is not deleted unseen.
    if (!(await deps.registry.credentials.deleteIf(stored))) throw new AdminError('conflict', `Credential ${id} was changed by another write while it was being deleted; look at it again`);
    res.status(204).end();
  });

  // Certificates that expire within `days` (default 30), soonest first, with their credential: the console's warning list.
  router.get('/certificates', async (req, res) => {
    onlyQueries(req.query, ['withinDays']);
    const days = queryWholeNumber(req.query, 'withinDays', 30, 0, 3650);
    const at = now();
    const certificates = (await deps.registry.credentials.list()).flatMap((c) => {
      const meta = credentialMetadata(c, deps.sealer, at);
      return (meta.certificates ?? []).filter(isReadable).filter((f) => Date.parse(f.notAfter) - at < days * DAY_MS).map((f) => ({ credentialId: c.id, credentialType: c.type, ...f }));
    }).sort((a, b) => a.notAfter.localeCompare(b.notAfter));
    res.json({ withinDays: days, certificates });
  });
  return router;
}
