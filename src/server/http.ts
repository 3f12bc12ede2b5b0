/** The node's HTTP port: Prometheus /metrics and /healthz (the dashboard mounts here too). */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer, type ServerOptions as TlsServerOptions } from "node:https";
import type { NodeMetrics } from "./metrics.js";

export type HttpRoute = (req: IncomingMessage, res: ServerResponse) => Promise<boolean> | boolean;

/** `gate` runs before every route (Host allow-list, /metrics token): true means it answered. */
export function createHttpServer(
  metrics: NodeMetrics, health: () => object, extraRoutes: HttpRoute[] = [], gate: HttpRoute = () => false, tls?: TlsServerOptions,
): Server {
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    // Once close() is called (node stopping), every response ends its connection: a
    // dashboard polling over keep-alive would otherwise keep close() waiting forever.
    if (!server.listening) res.setHeader("connection", "close");
    res.once("finish", () => {
      if (!server.listening) req.socket.end();
    });
    void handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end("internal error\n");
    });
  };
  const server: Server = tls ? createTlsServer(tls, onRequest) : createServer(onRequest);
  return server;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (await gate(req, res)) return;
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === "/metrics") {
      const body = await metrics.registry.metrics();
      res.writeHead(200, { "content-type": metrics.registry.contentType });
      res.end(body);
      return;
    }
    if (req.method === "GET" && path === "/healthz") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "ok", ...health() }));
      return;
    }
    for (const route of extraRoutes) if (await route(req, res)) return;
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  }
}
