/**
 * The stack's own floor for one write call (issue 15: "serial enqueue ≥ 0.8× the bare
 * unary + SQLite floor measured in the same run"): a grpc-js server with one unary
 * method that inserts its request's bytes into a WAL SQLite file (synchronous = NORMAL,
 * conveyor's default) and answers once the insert is committed, with the commit grouped
 * per event-loop turn as the node's is. No validation, no grain, no protobuf: what any
 * gRPC + SQLite task queue on this stack pays at least.
 *
 * Run as a child process by bench/floor.ts; prints `listening <port>` on stdout.
 */
import * as grpc from "@grpc/grpc-js";
import BetterSqlite3 from "better-sqlite3";
import { join } from "node:path";
import { FLOOR_PATH } from "./floor.js";

const dataDir = process.argv[2];
if (!dataDir) throw new Error("usage: floor-server.js DATA_DIR");
const db = new BetterSqlite3(join(dataDir, "floor.db"));
db.pragma("journal_mode = WAL");
db.pragma("synchronous = NORMAL");
db.exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)");
const insert = db.prepare("INSERT INTO t (body) VALUES (?)");
const begin = db.prepare("BEGIN");
const commit = db.prepare("COMMIT");

let waiting: Array<() => void> = [];
function committed(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
  });
}

const identity = (b: Buffer) => b;
const server = new grpc.Server();
server.addService({
  insert: { path: FLOOR_PATH, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
}, {
  insert: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
    if (waiting.length === 0) {
      begin.run();
      setImmediate(() => {
        commit.run();
        const done = waiting;
        waiting = [];
        for (const resolve of done) resolve();
      });
    }
    insert.run(call.request);
    void committed().then(() => callback(null, Buffer.alloc(0)));
  },
});
server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) throw err;
  process.stdout.write(`listening ${port}\n`);
});
process.on("SIGTERM", () => server.tryShutdown(() => {
  db.close();
  process.exit(0);
}));
