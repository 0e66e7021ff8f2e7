// A reference point of DESIGN.md §7 ("fastify ~15.6k" where the bare server does ~19-20k): fastify
// parses the JSON body and answers {}. Nothing is durable and nothing is logged; it tells how this
// machine treats a server that does any work per request, next to the bare one.
const app = require('fastify')({ logger: false });
app.post('/hook/:workflowId', async () => ({}));
app.listen({ port: 0, host: '127.0.0.1' }).then(() => process.stdout.write(`listening on http://127.0.0.1:${app.server.address().port}\n`));
