import { Router } from 'express';
import type { WorkflowDocument } from '../../platform/registry/documents';
import { DOCUMENT_ID } from '../../platform/registry/registry';
import type { AdminApiDeps } from '../deps';
import { AdminError } from '../errors';
import { checkedAtPath } from './path-id';
import { checkWorkflowDocument, hookUrl, triggerNodes } from '../operations/documents';
import { checkPreconditions, etagOf } from './preconditions';

/**
 * Workflows: list (with hook URLs and trigger nodes), get, put (the validation of `ingress workflows put`),
 * activate and deactivate, and each trigger node's latest sample data (`registry.samples`). A workflow read
 * carries an ETag; writes honour If-Match and If-None-Match (preconditions.ts) and land only over the version
 * they read (`putIf`), so that none undoes another that came between.
 */
/** How many times a write reads and writes again when another write came between its read and its write. */
const WRITE_ATTEMPTS = 5;

const changedEachTime = (id: string, verb: string) => new AdminError('conflict', `Workflow ${id} was changed by another write during each of ${WRITE_ATTEMPTS} attempts to ${verb} it; try again`);

export function workflowRoutes(deps: AdminApiDeps): Router {
  const router = Router();
  const summary = (w: WorkflowDocument) => ({ id: w.id, name: w.name ?? null, active: w.active, url: hookUrl(deps.publicBaseUrl, w.id), triggers: triggerNodes(w, deps.catalog) });
  const load = async (id: string): Promise<WorkflowDocument> => {
    const doc = DOCUMENT_ID.test(id) ? await deps.registry.workflows.get(id) : null;
    if (!doc) throw new AdminError('not-found', `No workflow ${JSON.stringify(id)}`);
    return doc;
  };

  router.get('/workflows', async (_req, res) => {
    res.json({ workflows: (await deps.registry.workflows.list()).map(summary) });
  });

  router.get('/workflows/:id', async (req, res) => {
    const doc = await load(req.params.id);
    res.set('ETag', etagOf(doc)).json(doc);
  });

  router.put('/workflows/:id', async (req, res) => {
    const doc: WorkflowDocument = checkedAtPath(req.params.id, req.body as unknown, (body) => checkWorkflowDocument(body, deps.catalog), 'workflow');
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const before = await deps.registry.workflows.get(doc.id);
      checkPreconditions(req, before, `Workflow ${doc.id}`);
      if (await deps.registry.workflows.putIf(doc, before)) { res.status(before ? 200 : 201).set('ETag', etagOf(doc)).json(summary(doc)); return; }
    }
    throw changedEachTime(doc.id, 'store');
  });

  for (const [verb, active] of [['activate', true], ['deactivate', false]] as const) {
    router.post(`/workflows/:id/${verb}`, async (req, res) => {
      // Only `active` changes: written over the document read, so a put that came between is not undone.
      for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
        const doc = await load(req.params.id);
        checkPreconditions(req, doc, `Workflow ${doc.id}`);
        const after = { ...doc, active };
        if (doc.active === active || await deps.registry.workflows.putIf(after, doc)) { res.set('ETag', etagOf(doc.active === active ? doc : after)).json(summary(after)); return; }
      }
      throw changedEachTime(req.params.id, verb);
    });
  }

  router.get('/workflows/:id/samples', async (req, res) => {
    const doc = await load(req.params.id);
    const nodes = await Promise.all(triggerNodes(doc, deps.catalog).map(async (n) => ({ node: n.name, type: n.type, samples: await deps.registry.samples.list(doc.id, n.name) })));
    res.json({ workflowId: doc.id, nodes });
  });

  router.get('/workflows/:id/nodes/:node/samples', async (req, res) => {
    const doc = await load(req.params.id);
    if (!doc.nodes.some((n) => n.name === req.params.node)) throw new AdminError('not-found', `Workflow ${doc.id} has no node ${JSON.stringify(req.params.node)}`);
    res.json({ workflowId: doc.id, node: req.params.node, samples: await deps.registry.samples.list(doc.id, req.params.node) });
  });
  return router;
}
