import { configDefaults, defineConfig } from "vitest/config";

/**
 * Slow tests whose subject is not Node, so CI runs them once (on Node 20) rather than on
 * every Node it tests: the dashboard's pages in headless Chromium (the server side they
 * call is the JSON API, which the integration tests cover on every Node) and the cluster
 * coordination against a real etcd.
 */
const NODE_INDEPENDENT = ["test/browser/**", "test/cluster/**"];

export default defineConfig({
  test: {
    globals: false,
    // Integration tests start real conveyord processes; keep the 2-core machine calm. The
    // pool stays vitest's default, forks: tests send signals, change process state and
    // load a native addon, which worker threads would share; and the time goes into the
    // daemons the tests start, not into starting test files.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two halves, so CI can choose (`npx vitest run --project node-sensitive`, or
    // CONVEYOR_TEST_PARTS for `npm test`, see scripts/test.mjs). A plain `vitest run` or
    // `npm test` runs both.
    projects: [
      {
        extends: true,
        test: {
          // Everything else, and any new test folder by default: what can behave
          // differently on another Node (the native SQLite addon and the storage over it,
          // gRPC over Node's http2 and TLS, the SDK, the daemon, the CLI, the package as
          // npm installs it under that Node).
          name: "node-sensitive",
          include: ["test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...NODE_INDEPENDENT],
        },
      },
      {
        extends: true,
        test: {
          name: "node-independent",
          include: NODE_INDEPENDENT.map((dir) => `${dir}/*.test.ts`),
        },
      },
    ],
  },
});
