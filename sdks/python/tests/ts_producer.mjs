// Enqueues with the TypeScript SDK for the cross-language tests. argv: address queue type.
// Prints one line: "enqueued <json {json: id, bytes: id}>".
import { Client, bytes, json, newTask } from "../../../dist/src/index.js";

const [address, queue, type] = process.argv.slice(2);
const client = new Client({ address });
const meta = { tenant: "acme", "trace-id": "t-ü-1" };
const a = await client.enqueue(newTask(type, json({ to: "ada@example.com", n: 3, note: "héllo ✓", list: [1, 2.5, null] }), meta), { queue });
const b = await client.enqueue(newTask(type, bytes(new Uint8Array([0, 1, 254, 255]), "application/x-test"), meta), { queue });
console.log(`enqueued ${JSON.stringify({ json: a.id, bytes: b.id })}`);
client.close();
