import { TestEnvironment } from 'jest-environment-node';
import { quietKafkajsNegativeTimeouts } from '../../services/cli/process-warnings';

/**
 * jest's node environment, with the service's filter for kafkajs's benign negative-timeout warning
 * (services/cli/process-warnings.ts) on the worker's own process: the timers that warn are the worker's,
 * while the `process` a test or a setup file sees is jest's copy of it.
 */
export default class NodeEnvironment extends TestEnvironment {
  constructor(...args: ConstructorParameters<typeof TestEnvironment>) {
    super(...args);
    quietKafkajsNegativeTimeouts(process);
  }
}
