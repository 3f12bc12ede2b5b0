// A worker process for signal and reconnection tests, with the Worker's default signal
// handling. argv: address queue. Logs to stdout as JSON lines ({"level","msg"}); prints
// "started <id>" when a task of type "slow" starts and "finished <id>" when it returns
// (after the number of ms in its JSON payload's "ms"); tasks of type "quick" return at once.
import { Mux, Worker } from "../../dist/src/index.js";

const [address, queue] = process.argv.slice(2);
const line = (level) => (msg) => process.stdout.write(`${JSON.stringify({ level, msg, t: Date.now() })}\n`);
const mux = new Mux()
  .handle("slow", async (task) => {
    process.stdout.write(`started ${task.id}\n`);
    await new Promise((resolve) => setTimeout(resolve, task.json().ms));
    process.stdout.write(`finished ${task.id}\n`);
    return "done";
  })
  .handle("quick", (task) => {
    process.stdout.write(`ran ${task.id} ${Date.now()}\n`);
  });
new Worker({ mux, address, queues: [queue], concurrency: 2, logger: { info: line("info"), warn: line("warn") } }).start();
