/** The pipeline's topics (DESIGN.md §4). Execution queues per trigger kind come from the configuration. */
export const TOPICS = {
  received: 'ingress.received.v1',
  decoded: 'ingress.decoded.v1',
  deadLetter: 'ingress.dead-letter.v1',
  executions: 'executions.requested.v1',
} as const;
