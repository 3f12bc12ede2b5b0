/**
 * A minimal Chrome DevTools Protocol client for a daemon started with `--inspect`: just
 * enough WebSocket (RFC 6455: one handshake, masked text frames out, unmasked frames
 * in) to force a full garbage collection in the daemon and read its memory use.
 *
 * Why not a library: the only WebSocket client at hand is Node's own, which Node 20 hides
 * behind --experimental-websocket; and the bench needs two calls, not a debugger.
 */
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";

export interface DaemonMemory {
  rssBytes: number;
  heapUsedBytes: number;
  heapTotalBytes: number;
  externalBytes: number;
  arrayBuffersBytes: number;
}

export class Inspector {
  private buffer = Buffer.alloc(0);
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk) => this.onData(chunk));
    socket.on("close", () => {
      for (const p of this.pending.values()) p.reject(new Error("inspector connection closed"));
      this.pending.clear();
    });
  }

  /** Connects to `ws://host:port/id`, as printed by `Debugger listening on ...`. */
  static async connect(url: string): Promise<Inspector> {
    const { hostname, port, pathname } = new URL(url);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const key = randomBytes(16).toString("base64");
    socket.write(`GET ${pathname} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    const rest = await new Promise<Buffer>((resolve, reject) => {
      let head = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf("\r\n\r\n");
        if (end < 0) return;
        socket.off("data", onData);
        const status = head.subarray(0, head.indexOf("\r\n")).toString();
        if (!status.includes(" 101 ")) reject(new Error(`inspector handshake refused: ${status}`));
        else resolve(head.subarray(end + 4));
      };
      socket.on("data", onData);
      socket.once("error", reject);
    });
    const inspector = new Inspector(socket);
    if (rest.length > 0) inspector.onData(rest);
    return inspector;
  }

  /** One CDP call; resolves with its result. */
  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    const payload = Buffer.from(JSON.stringify({ id, method, params }));
    const mask = randomBytes(4);
    const header = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length])
      : payload.length < 65_536 ? Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff])
      : (() => { throw new Error("CDP message too large for this client"); })();
    const masked = Buffer.from(payload);
    for (let i = 0; i < masked.length; i++) masked[i]! ^= mask[i % 4]!;
    const done = new Promise<unknown>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.socket.write(Buffer.concat([header, mask, masked]));
    return done;
  }

  /** A full, precise GC in the daemon (HeapProfiler.collectGarbage), then its memory use. */
  async collectGarbage(): Promise<DaemonMemory> {
    await this.call("HeapProfiler.collectGarbage");
    return this.memory();
  }

  /** The daemon's process.memoryUsage(), without collecting first. */
  async memory(): Promise<DaemonMemory> {
    const answer = (await this.call("Runtime.evaluate", { expression: "JSON.stringify(process.memoryUsage())", returnByValue: true })) as {
      result: { value: string };
    };
    const m = JSON.parse(answer.result.value) as { rss: number; heapUsed: number; heapTotal: number; external: number; arrayBuffers: number };
    return { rssBytes: m.rss, heapUsedBytes: m.heapUsed, heapTotalBytes: m.heapTotal, externalBytes: m.external, arrayBuffersBytes: m.arrayBuffers };
  }

  close(): void {
    this.socket.destroy();
  }

  /** Reassembles server frames (unmasked; text, possibly fragmented) into CDP answers. */
  private fragments: Buffer[] = [];
  private onData(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.buffer.length < 2) return;
      const fin = (this.buffer[0]! & 0x80) !== 0;
      const opcode = this.buffer[0]! & 0x0f;
      let length = this.buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) return;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) return;
        length = Number(this.buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.buffer.length < offset + length) return;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      if (opcode === 0x8) return void this.socket.destroy();
      if (opcode !== 0x1 && opcode !== 0x0) continue; // pings and the like: not needed here
      this.fragments.push(Buffer.from(payload));
      if (!fin) continue;
      const text = Buffer.concat(this.fragments).toString("utf8");
      this.fragments = [];
      const message = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string } };
      if (message.id === undefined) continue; // an event
      const p = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error) p?.reject(new Error(`CDP: ${message.error.message}`));
      else p?.resolve(message.result);
    }
  }
}
