// A worker process for crash tests. argv: address queue [batch]. Every task (or batch)
// of type "hang" prints "started <id> <id> ..." and then hangs until the process is killed.
import { Mux, Worker } from "../../dist/src/index.js";

const [address, queue, mode] = process.argv.slice(2);
const hang = () => new Promise(() => {});
const mux = mode === "batch"
  ? new Mux().handleBatch("hang", async (tasks) => {
      process.stdout.write(`started ${tasks.map((t) => t.id).join(" ")}\n`);
      await hang();
    })
  : new Mux().handle("hang", async (task) => {
      process.stdout.write(`started ${task.id}\n`);
      await hang();
    });
new Worker({ mux, address, queues: [queue], concurrency: 1 }).start();
