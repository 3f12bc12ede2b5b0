/**
 * The nats-server fixture itself: a single server and a cluster of three come up with
 * JetStream ready on free ports, take an acknowledged publish to a stream replicated on
 * every server (file storage), and are gone (by PID) after stop.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, describe, expect, it } from "vitest";
import { startNats, type NatsCluster } from "../support/nats.js";

describe("nats-server test fixture", () => {
  let nats: NatsCluster | undefined;
  afterEach(async () => {
    await nats?.stop();
    nats = undefined;
  });

  it.each([1, 3])("starts %i server(s) with JetStream, stores a publish on all of them, and stops them", async (size) => {
    nats = await startNats({ size });
    expect(nats.servers).toHaveLength(size);
    const nc = await connect({ servers: nats.urls });
    try {
      const jsm = await jetstreamManager(nc);
      const info = await jsm.streams.add({ name: "FIXTURE", subjects: ["fixture.>"], num_replicas: size, storage: "file" });
      expect(info.config.num_replicas).toBe(size);
      const ack = await jetstream(nc).publish("fixture.a", "v");
      expect(ack.seq).toBe(1);
      const stored = await jsm.streams.getMessage("FIXTURE", { seq: 1 });
      expect(stored?.string()).toBe("v");
      const state = await jsm.streams.info("FIXTURE");
      expect(state.cluster?.replicas?.length ?? 0).toBe(size - 1);
    } finally {
      await nc.close();
    }
    const servers = nats.servers;
    await nats.stop();
    nats = undefined;
    for (const s of servers) {
      expect(s.running).toBe(false);
      expect(() => process.kill(s.pid, 0)).toThrow();
    }
  });
});
