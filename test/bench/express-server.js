// A reference point of DESIGN.md §7 ("express 5 ... ~4k with express.json" where the bare server does
// ~19-20k): express parses the JSON body and answers {}, as a webhook endpoint built on it would at least.
// Nothing is durable and nothing is logged.
const express = require('express');
const app = express();
app.post('/hook/:workflowId', express.json({ limit: '1mb' }), (req, res) => res.json({}));
const server = app.listen(0, '127.0.0.1', () => process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`));
