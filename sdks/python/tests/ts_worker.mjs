// A TypeScript SDK worker for the cross-language tests. argv: address queue type.
// Prints "got <json {id, payloadHex, contentType, metadata}>" per task and returns {seen: id}.
import { Mux, Worker } from "../../../dist/src/index.js";

const [address, queue, type] = process.argv.slice(2);
const mux = new Mux().handle(type, async (task) => {
  const line = { id: task.id, payloadHex: Buffer.from(task.payload).toString("hex"), contentType: task.contentType, metadata: task.metadata };
  process.stdout.write(`got ${JSON.stringify(line)}\n`);
  return { seen: task.id };
});
const worker = new Worker({ mux, address, queues: [queue], concurrency: 4 }).start();
await worker.registered;
process.stdout.write("ready\n");
process.on("SIGTERM", () => void worker.stop({ graceMs: 0 }).then(() => process.exit(0)));
