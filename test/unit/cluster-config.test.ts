/** The cluster settings: defaults, flags' names, and refusals that name the problem. */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/server/config.js";
import { parseEndpoints } from "../../src/cluster/start-membership.js";
import { parseNatsUrls } from "../../src/server/changelog-link.js";

describe("cluster settings", () => {
  it("default to a single node with the documented values", () => {
    expect(loadConfig({})).toMatchObject({
      clusterEtcd: "", clusterName: "default", clusterPartitions: 64, clusterMemberTtlMs: 5_000, clusterHandoffWaitMs: 2_000, clusterAdvertise: "",
    });
  });

  it("are read from yaml keys and CONVEYOR_ variables", () => {
    const c = loadConfig({
      env: { CONVEYOR_CLUSTER_ETCD: "http://e1:2379,e2:2379", CONVEYOR_CLUSTER_MEMBER_TTL: "2s" },
      overrides: { cluster_name: "prod", cluster_partitions: "128", cluster_handoff_wait: "500ms", cluster_advertise: "10.0.0.5:7233" },
    });
    expect(c).toMatchObject({
      clusterEtcd: "http://e1:2379,e2:2379", clusterMemberTtlMs: 2_000, clusterName: "prod", clusterPartitions: 128,
      clusterHandoffWaitMs: 500, clusterAdvertise: "10.0.0.5:7233",
    });
    expect(parseEndpoints(c.clusterEtcd)).toEqual(["http://e1:2379", "http://e2:2379"]);
    expect(parseEndpoints(" 127.0.0.1:2379 ,")).toEqual(["http://127.0.0.1:2379"]);
    expect(parseEndpoints("")).toEqual([]);
  });

  it("take the changelog's NATS URLs only with etcd: cluster_nats, --cluster-nats, CONVEYOR_CLUSTER_NATS", () => {
    expect(loadConfig({}).clusterNats).toBe("");
    const c = loadConfig({ env: { CONVEYOR_CLUSTER_NATS: "nats://n1:4222, n2:4222" }, overrides: { cluster_etcd: "e1:2379" } });
    expect(parseNatsUrls(c.clusterNats)).toEqual(["nats://n1:4222", "nats://n2:4222"]);
    expect(() => loadConfig({ overrides: { cluster_nats: "n1:4222" } })).toThrow(/cluster_nats needs cluster_etcd/);
  });

  it("refuse what etcd or the partition math cannot take", () => {
    expect(() => loadConfig({ overrides: { cluster_member_ttl: "1500ms" } })).toThrow(/whole number of seconds/);
    expect(() => loadConfig({ overrides: { cluster_member_ttl: "500ms" } })).toThrow(/at least 1s/);
    expect(() => loadConfig({ overrides: { cluster_partitions: "0" } })).toThrow(/cluster_partitions must be at least 1/);
    expect(() => loadConfig({ overrides: { cluster_partitions: "5000" } })).toThrow(/at most 4096/);
    expect(() => loadConfig({ overrides: { cluster_name: "a/b" } })).toThrow(/cluster_name/);
  });
});
