/** Real backends (Kafka, Azurite, cosmosdb-server) are started once for the whole run by test/support/global-setup. */
module.exports = {
  testEnvironment: '<rootDir>/test/support/node-environment.ts',
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } } }],
    // jose 6 ships only ES modules. The service's CommonJS build loads it with Node's require(esm); Jest 29 runs
    // the tests as CommonJS and cannot, so its files are compiled to CommonJS like ours.
    '/node_modules/jose/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: ['/node_modules/(?!jose/)'],
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  testTimeout: 60000,
  maxWorkers: 2,
};
