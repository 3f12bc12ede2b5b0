// A worker process for crash tests: runs every task of the queue given as argv[2] by
// printing "started <taskId>" and then hanging until it is killed.
import { Mux, Worker } from "../../dist/src/index.js";

const [address, queue] = process.argv.slice(2);
const mux = new Mux().handle("hang", async (task) => {
  process.stdout.write(`started ${task.id}\n`);
  await new Promise(() => {});
});
new Worker({ mux, address, queues: [queue], concurrency: 1 }).start();
