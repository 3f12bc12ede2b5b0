/**
 * The etcd fixture itself: a single member and a cluster of three come up healthy on
 * free ports, take a write through the npm client, and are gone (by PID) after stop.
 */
import { Etcd3 } from "etcd3";
import { afterEach, describe, expect, it } from "vitest";
import { startEtcd, type EtcdCluster } from "../support/etcd.js";

describe("etcd test fixture", () => {
  let etcd: EtcdCluster | undefined;
  afterEach(async () => {
    await etcd?.stop();
    etcd = undefined;
  });

  it.each([1, 3])("starts %i member(s), serves a write, and stops them", async (size) => {
    etcd = await startEtcd({ size });
    expect(etcd.members).toHaveLength(size);
    const client = new Etcd3({ hosts: etcd.hosts });
    try {
      await client.put("fixture/k").value("v");
      expect(await client.get("fixture/k").string()).toBe("v");
    } finally {
      client.close();
    }
    const members = etcd.members;
    await etcd.stop();
    etcd = undefined;
    for (const m of members) {
      expect(m.running).toBe(false);
      expect(() => process.kill(m.pid, 0)).toThrow();
    }
  });
});
