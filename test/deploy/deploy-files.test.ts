/**
 * deploy/: the systemd unit and cluster configs, the Compose file and the Kubernetes
 * manifests. Docker and a Kubernetes cluster cannot run in CI, so this checks what can be
 * checked without them, against the code rather than a copy of it:
 * - every YAML file parses; every conveyor.yaml loads with loadConfig (so its keys and
 *   values are the node's own), with the env files and per-pod variables on top;
 * - every CONVEYOR_* name, conveyord flag and etcd flag used anywhere is one that
 *   conveyor (KNOWN_ENV_VARS, `conveyord --help`) or etcd (`etcd --help`) knows;
 * - every nats-server configuration passes the configuration test of the nats-server the
 *   changelog tests run (`nats-server -t`, Debian's 2.9.10), with each server's environment
 *   and test certificates in place of its TLS files; each sets max_payload to what the
 *   changelog requires, JetStream with a store on a persistent volume, a name of its own and
 *   routes to the other two; and every conveyor config's cluster_nats names the three;
 * - auth files load with parseAuthPolicy once their placeholders are filled, and no
 *   token, real hash or private key is checked in;
 * - the unit runs package.json's bin and passes `systemd-analyze verify`, as does Debian's
 *   nats-server unit with its drop-in; the stop timeouts leave room for shutdown_grace and
 *   lame_duck_duration; Compose and Kubernetes references resolve (files, services,
 *   volumes, Secrets, ports, selectors), and `kubectl kustomize` builds.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { KNOWN_ENV_VARS, loadConfig, SETTING_NAMES, type NodeConfig } from "../../src/server/config.js";
import { parseAuthPolicy } from "../../src/server/security/auth-file.js";
import { ClusterSecret, newClusterSecret } from "../../src/server/security/cluster-secret.js";
import { parseDurationMs } from "../../src/base/duration.js";
import { NATS_MAX_PAYLOAD_REQUIRED } from "../../src/changelog/changelog.js";
import { parseNatsUrls } from "../../src/server/changelog-link.js";
import { REPO_ROOT } from "../support/node-process.js";
import { etcdBinary } from "../support/etcd.js";
import { natsBinary } from "../support/nats.js";
import { makeCerts } from "../support/certs.js";

const DEPLOY = join(REPO_ROOT, "deploy");
const read = (path: string) => readFileSync(join(REPO_ROOT, path), "utf8");
const pkg = JSON.parse(read("package.json")) as { name: string; bin: Record<string, string> };

type Doc = Record<string, any>;

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [relative(REPO_ROOT, path)];
  });
}
const deployFiles = filesUnder(DEPLOY);
const yamlFiles = deployFiles.filter((f) => /\.ya?ml$/.test(f));

/** Every document of a YAML file, failing on any parse error or warning. */
function yamlDocs(path: string): Doc[] {
  // merge: Compose files share settings through YAML merge keys (<<: *node), as Compose reads them.
  return parseAllDocuments(read(path), { merge: true }).map((doc, i) => {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length > 0) throw new Error(`${path} document ${i}: ${problems.map((p) => p.message).join("; ")}`);
    return doc.toJS() as Doc;
  }).filter((d) => d !== null);
}

/** `conveyord --help`'s options: the flags the node's command line accepts, as the code defines them. */
const CONVEYORD_FLAGS: ReadonlySet<string> = (() => {
  const help = execFileSync(process.execPath, ["--import", "tsx", join(REPO_ROOT, "src/main.ts"), "--help"], { cwd: REPO_ROOT, encoding: "utf8" });
  const options = help.slice(help.indexOf("Options:"), help.indexOf("Commands:"));
  return new Set([...options.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z-]*)/gm)].map((m) => m[1]!));
})();

/** The --flags of a conveyord argument list (values that follow a flag are not flags). */
function flagsOf(args: string[]): string[] {
  return args.filter((a) => a.startsWith("--")).map((a) => a.split("=")[0]!);
}

/** KEY=value lines of an env file (systemd EnvironmentFile syntax, without quoting). */
function envFile(path: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of read(path).split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    const eq = t.indexOf("=");
    if (eq <= 0) throw new Error(`${path}: not KEY=value: ${line}`);
    env[t.slice(0, eq)] = t.slice(eq + 1);
  }
  return env;
}

/** A systemd unit or drop-in: section → key → values (a key may repeat). */
function unitFile(path: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const line of read(path).split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#") || t.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(t);
    if (header) {
      current = sections.get(header[1]!) ?? new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const eq = t.indexOf("=");
    if (!current || eq <= 0) throw new Error(`${path}: unexpected line ${line}`);
    const key = t.slice(0, eq);
    current.set(key, [...(current.get(key) ?? []), t.slice(eq + 1)]);
  }
  return sections;
}
const last = (unit: Map<string, Map<string, string[]>>, section: string, key: string) => unit.get(section)?.get(key)?.at(-1);

/** Loads a conveyor.yaml given as text, the way conveyord does, with the given environment on top. */
function loadConfigText(text: string, env: Record<string, string> = {}): NodeConfig {
  const file = join(mkdtempSync(join(tmpdir(), "conveyor-deploy-")), "conveyor.yaml");
  writeFileSync(file, text);
  return loadConfig({ file, env });
}

/** Seconds of a systemd / Compose duration ("60", "60s", "1min 30s" are not all needed here: s and plain numbers). */
function seconds(value: string): number {
  const m = /^(\d+)(s)?$/.exec(value.trim());
  if (!m) throw new Error(`cannot read ${JSON.stringify(value)} as seconds`);
  return Number(m[1]);
}

describe("deploy/ files", () => {
  it("has the files the docs and the package promise", () => {
    for (const f of ["deploy/conveyord.service", "deploy/systemd/conveyord-cluster.conf", "deploy/compose/docker-compose.yml", "deploy/Dockerfile",
      "deploy/kubernetes/statefulset.yaml", "deploy/kubernetes/kustomization.yaml"]) expect(deployFiles, f).toContain(f);
    expect(JSON.parse(read("package.json")).files).toContain("deploy/");
    // Every deploy/ path the README and the manual name exists (a renamed file leaves no
    // dead link). A path with "-N" (node-N.env) stands for the files of nodes 1 to 3.
    for (const doc of ["README.md", ...CLUSTER_DOCS, "docs/production.md", "docs/getting-started.md"]) {
      for (const [, path] of read(doc).matchAll(/(?<![\w/])(deploy\/[\w./-]*\w)/g)) {
        for (const each of path!.includes("-N.") ? [1, 2, 3].map((n) => path!.replace("-N.", `-${n}.`)) : [path!]) {
          expect(existsSync(join(REPO_ROOT, each)), `${doc} names ${each}`).toBe(true);
        }
      }
    }
  });

  it("every YAML file parses", () => {
    expect(yamlFiles.length).toBeGreaterThan(8);
    for (const f of yamlFiles) expect(() => yamlDocs(f), f).not.toThrow();
  });

  it("every CONVEYOR_* name in deploy/ and in the cluster docs is one conveyor reads", () => {
    const texts = deployFiles.map((f) => [f, read(f)] as const);
    for (const doc of CLUSTER_DOCS) texts.push([doc, read(doc)]);
    for (const [file, text] of texts) {
      for (const [name] of text.matchAll(/\bCONVEYOR_[A-Z0-9_]*[A-Z0-9]/g)) {
        expect(KNOWN_ENV_VARS, `${file}: ${name}`).toContain(name);
      }
    }
  });

  it("the cluster docs' conveyord command lines use flags conveyord has", () => {
    expect(CONVEYORD_FLAGS).toContain("--cluster-etcd");
    const lines = CLUSTER_DOCS.flatMap((doc) => read(doc).split("\n")).filter((l) => /^\s*(npx )?conveyord /.test(l));
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) {
      for (const flag of flagsOf(line.split(/\s+/))) expect(CONVEYORD_FLAGS, `docs/cluster: ${line}`).toContain(flag);
    }
  });

  it("no token, token hash or private key is checked in", () => {
    for (const f of deployFiles) {
      const text = read(f);
      expect(text, f).not.toMatch(/\bcvy_[A-Za-z0-9_-]{8,}/);
      expect(text, f).not.toMatch(/\b[0-9a-f]{64}\b/i);
      expect(text, f).not.toMatch(/-----BEGIN [A-Z ]*PRIVATE KEY-----/);
    }
  });
});

describe("deploy/ auth files", () => {
  /** The placeholders (<...>) replaced by distinct hashes, as an operator would. */
  const filled = (text: string) => {
    let n = 0;
    return text.replace(/<[^>\n]+>/g, () => (++n).toString(16).padStart(64, "a"));
  };
  const authFiles: Array<[string, string]> = [
    ["deploy/auth.yaml", read("deploy/auth.yaml")],
    ["deploy/compose/auth.yaml", read("deploy/compose/auth.yaml")],
    ["deploy/kubernetes/secret.yaml", yamlDocs("deploy/kubernetes/secret.yaml").find((d) => d.metadata.name === "conveyor-auth")!.stringData["auth.yaml"]],
  ];

  it.each(authFiles)("%s has the auth file's format (placeholders filled in)", (where, text) => {
    expect(() => parseAuthPolicy(parseYaml(filled(text)) ?? {}, where)).not.toThrow();
    // The commented-out entries of the templates must be valid once uncommented too.
    const uncommented = text.replace(/^#( {2}- name:|\s{4}\w+:)/gm, "$1").replace(/^tokens: \[\]$/m, "tokens:");
    expect(() => parseAuthPolicy(parseYaml(filled(uncommented)) ?? {}, `${where} (uncommented)`)).not.toThrow();
  });

  it("a node would refuse the placeholders as they are (they cannot be deployed by accident)", () => {
    const [, text] = authFiles[2]!;
    expect(() => parseAuthPolicy(parseYaml(text), "secret")).toThrow(/sha256 must be 64 hex digits/);
    // The cluster secrets too: Kubernetes' placeholder, and Compose's file that holds only how to make one.
    const k8s = yamlDocs("deploy/kubernetes/secret.yaml").find((d) => d.metadata.name === "conveyor-cluster")!.stringData["cluster.secret"];
    expect(() => ClusterSecret.parse(k8s, "conveyor-cluster")).toThrow(/more than one word/);
    expect(() => ClusterSecret.parse(read("deploy/compose/cluster.secret"), "compose")).toThrow(/holds no secret/);
    expect(() => ClusterSecret.parse(newClusterSecret(), "filled")).not.toThrow();
  });
});

describe("deploy/ systemd", () => {
  const unit = unitFile("deploy/conveyord.service");
  const dropIn = unitFile("deploy/systemd/conveyord-cluster.conf");
  const clusterYaml = read("deploy/systemd/conveyor-cluster.yaml");

  it("the unit runs the package's conveyord bin, hardened", () => {
    const execStart = last(unit, "Service", "ExecStart")!.split(/\s+/);
    const script = execStart[1]!;
    expect(script).toBe(`/opt/conveyor/node_modules/${pkg.name}/${pkg.bin.conveyord!.replace(/^\.\//, "")}`);
    expect(existsSync(join(REPO_ROOT, pkg.bin.conveyord!))).toBe(true);
    for (const flag of flagsOf(execStart.slice(2))) expect(CONVEYORD_FLAGS).toContain(flag);
    expect(last(unit, "Service", "User")).toBe("conveyor");
    expect(last(unit, "Service", "StateDirectory")).toBe("conveyor");
    expect(last(unit, "Service", "ProtectSystem")).toBe("strict");
    expect(last(unit, "Service", "NoNewPrivileges")).toBe("true");
    expect(last(unit, "Service", "Restart")).toBe("on-failure");
    expect(last(unit, "Service", "KillSignal")).toBe("SIGTERM");
  });

  it("each node's config loads, with a distinct node id and advertised address, and stops within TimeoutStopSec", () => {
    const ids = new Set<string>();
    const advertised = new Set<string>();
    for (const n of [1, 2, 3]) {
      const env = envFile(`deploy/systemd/node-${n}.env`);
      const config = loadConfigText(clusterYaml, env);
      ids.add(config.nodeId);
      advertised.add(config.clusterAdvertise);
      expect(config.clusterEtcd).not.toBe("");
      expect(config.authFile).not.toBe("");
      expect(config.clusterSecretFile, "cluster_secret_file: required with auth_file in a cluster").not.toBe("");
      expect(config.tlsCert).not.toBe("");
      // The node trusts etcd's CA for both of its etcd connections (see node-N.env).
      expect(env.GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).toBe(env.NODE_EXTRA_CA_CERTS);
      expect(config.shutdownGraceMs).toBeLessThan(seconds(last(dropIn, "Service", "TimeoutStopSec")!) * 1000);
    }
    expect(ids.size).toBe(3);
    expect(advertised.size).toBe(3);
    // The single-node config too, within the unit's own timeout.
    const single = loadConfigText(read("deploy/conveyor.yaml"));
    expect(single.shutdownGraceMs).toBeLessThan(seconds(last(unit, "Service", "TimeoutStopSec")!) * 1000);
    expect(last(dropIn, "Service", "EnvironmentFile")).toBe("/etc/conveyor/node.env");
  });

  it("the etcd members' settings are etcd's own, and form one cluster", () => {
    const etcdFlags = etcdHelpFlags();
    const members = [1, 2, 3].map((n) => envFile(`deploy/systemd/etcd/etcd-${n}.env`));
    for (const env of members) {
      for (const name of Object.keys(env)) expect(etcdFlags, name).toContain(`--${name.replace(/^ETCD_/, "").toLowerCase().replace(/_/g, "-")}`);
      expect(env.ETCD_INITIAL_CLUSTER).toBe(members[0]!.ETCD_INITIAL_CLUSTER);
      expect(env.ETCD_INITIAL_CLUSTER).toContain(`${env.ETCD_NAME}=${env.ETCD_INITIAL_ADVERTISE_PEER_URLS}`);
    }
    // conveyord's cluster_etcd names each member's advertised client URL.
    const etcdUrls = loadConfigText(clusterYaml).clusterEtcd.split(",");
    expect(etcdUrls.sort()).toEqual(members.map((m) => m.ETCD_ADVERTISE_CLIENT_URLS).sort());
  });

  const analyze = spawnSync("systemd-analyze", ["--version"]).status === 0;
  it.skipIf(!analyze)("systemd-analyze verify accepts the unit with the cluster drop-in", () => {
    const dir = mkdtempSync(join(tmpdir(), "conveyor-units-"));
    // systemd-analyze checks that ExecStart's program exists: this machine's node stands
    // in for /usr/bin/node; the rest of the unit is verified as shipped.
    writeFileSync(join(dir, "conveyord.service"), read("deploy/conveyord.service").replace("ExecStart=/usr/bin/node ", `ExecStart=${process.execPath} `));
    mkdirSync(join(dir, "conveyord.service.d"));
    cpSync(join(DEPLOY, "systemd/conveyord-cluster.conf"), join(dir, "conveyord.service.d/cluster.conf"));
    const result = spawnSync("systemd-analyze", ["verify", join(dir, "conveyord.service")], {
      encoding: "utf8", env: { ...process.env, SYSTEMD_UNIT_PATH: `${dir}:` },
    });
    // Unknown keys are only warnings (exit 0): any line about our files fails the test.
    const ours = `${result.stdout}${result.stderr}`.split("\n").filter((l) => l.includes(dir) || l.includes("conveyord"));
    expect(ours).toEqual([]);
    expect(result.status).toBe(0);
  });
});

describe("deploy/ Docker Compose", () => {
  const composeDir = join(DEPLOY, "compose");
  const compose = yamlDocs("deploy/compose/docker-compose.yml")[0]!;
  const services = compose.services as Record<string, Doc>;
  const nodes = Object.entries(services).filter(([, s]) => s.build);
  const etcds = Object.entries(services).filter(([, s]) => String(s.image ?? "").includes("etcd"));

  it("has three nodes built from deploy/Dockerfile and three etcd members", () => {
    expect(nodes.map(([name]) => name)).toEqual(["node-1", "node-2", "node-3"]);
    expect(etcds).toHaveLength(3);
    for (const [, s] of nodes) {
      expect(existsSync(join(composeDir, s.build.context, s.build.dockerfile))).toBe(true);
      expect(existsSync(join(composeDir, s.build.context, "package.json"))).toBe(true);
    }
    for (const [, s] of etcds) expect(s.image).toMatch(/^(quay\.io\/coreos|gcr\.io\/etcd-development)\/etcd:v3\.[4-9]\./);
  });

  it("references only files, services and volumes that exist", () => {
    for (const [name, s] of Object.entries(services)) {
      for (const dep of Object.keys(s.depends_on ?? {})) expect(Object.keys(services), `${name} depends on ${dep}`).toContain(dep);
      for (const v of (s.volumes ?? []) as string[]) {
        const source = v.split(":")[0]!;
        if (source.startsWith(".")) expect(existsSync(resolve(composeDir, source)), `${name}: ${v}`).toBe(true);
        else expect(Object.keys(compose.volumes ?? {}), `${name}: ${v}`).toContain(source);
      }
    }
  });

  it("each node: known flags, its own id, data volume and advertised service name; loads its config; checks /healthz; stops in time", () => {
    const ids = new Set<string>();
    const volumes = new Set<string>();
    for (const [name, s] of nodes) {
      const args = s.command as string[];
      for (const flag of flagsOf(args)) expect(CONVEYORD_FLAGS, `${name}: ${flag}`).toContain(flag);
      const arg = (flag: string) => args[args.indexOf(flag) + 1]!;
      ids.add(arg("--node-id"));
      expect(Object.keys(services)).toContain(arg("--advertise").split(":")[0]);
      expect(s.healthcheck.test.join(" ")).toContain("/healthz");
      for (const k of Object.keys(s.environment ?? {})) expect(KNOWN_ENV_VARS, `${name}: ${k}`).toContain(k);
      // The config file it is given is mounted from this directory, as is its auth file.
      const mounts = new Map((s.volumes as string[]).map((v) => [v.split(":")[1]!, v.split(":")[0]!]));
      const configSource = mounts.get(arg("--config"))!;
      expect(configSource, `${name}: --config is mounted`).toBeDefined();
      const config = loadConfigText(readFileSync(resolve(composeDir, configSource), "utf8"), {});
      expect(mounts.has(config.authFile), `${name}: auth_file is mounted`).toBe(true);
      expect(mounts.has(config.clusterSecretFile), `${name}: cluster_secret_file is mounted`).toBe(true);
      volumes.add(mounts.get(config.dataDir)!);
      expect(config.shutdownGraceMs).toBeLessThan(parseDurationMs(s.stop_grace_period));
      for (const url of config.clusterEtcd.split(",")) expect(etcds.map(([e]) => e)).toContain(new URL(url).hostname);
    }
    expect(ids.size).toBe(3);
    expect(volumes.size).toBe(3);
    expect([...volumes].every((v) => v !== undefined && Object.keys(compose.volumes).includes(v))).toBe(true);
  });

  it("the etcd members' flags are etcd's own", () => {
    const etcdFlags = etcdHelpFlags();
    for (const [name, s] of etcds) for (const flag of flagsOf(s.command)) expect(etcdFlags, `${name}: ${flag}`).toContain(flag);
  });

  it("the image runs the package's conveyord bin, and its build context leaves node_modules out", () => {
    const dockerfile = read("deploy/Dockerfile");
    const entrypoint = JSON.parse(/^ENTRYPOINT (.+)$/m.exec(dockerfile)![1]!) as string[];
    expect(Object.keys(pkg.bin)).toContain(entrypoint[0]);
    const cmd = JSON.parse(/^CMD (.+)$/m.exec(dockerfile)![1]!) as string[];
    for (const flag of flagsOf(cmd)) expect(CONVEYORD_FLAGS).toContain(flag);
    for (const [, source] of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const f of source!.split(/\s+/)) if (f !== ".") expect(existsSync(join(REPO_ROOT, f)), `COPY ${f}`).toBe(true);
    }
    expect(read("deploy/Dockerfile.dockerignore")).toMatch(/^\*\*\/node_modules$/m);
    expect(dockerfile).toMatch(/^FROM node:(20|22)[.-]/m);
  });
});

describe("deploy/ Kubernetes", () => {
  const kustomization = yamlDocs("deploy/kubernetes/kustomization.yaml")[0]!;
  const docs = (kustomization.resources as string[]).flatMap((f) => yamlDocs(`deploy/kubernetes/${f}`));
  const find = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata?.name === name);
  const sts = find("StatefulSet", "conveyor")!;
  const pod = sts.spec.template.spec;
  const container = pod.containers[0];
  const configMap = find("ConfigMap", "conveyor-config")!;

  it("every manifest has an apiVersion, a kind and a name", () => {
    expect(docs.length).toBeGreaterThan(8);
    for (const d of docs) {
      expect(d.apiVersion, JSON.stringify(d).slice(0, 80)).toBeTruthy();
      expect(d.kind).toBeTruthy();
      expect(d.metadata?.name).toBeTruthy();
    }
  });

  it("selectors match the pods they select", () => {
    const podLabels = (app: string) => find("StatefulSet", app)!.spec.template.metadata.labels;
    for (const d of docs) {
      const selector = d.kind === "Service" ? d.spec.selector : ["StatefulSet", "PodDisruptionBudget"].includes(d.kind) ? d.spec.selector.matchLabels : undefined;
      if (!selector) continue;
      const target = docs.find((s) => s.kind === "StatefulSet" && Object.entries(selector).every(([k, v]) => s.spec.template.metadata.labels[k] === v));
      expect(target, `${d.kind}/${d.metadata.name} selects no StatefulSet's pods`).toBeDefined();
      if (d.kind === "StatefulSet") expect(podLabels(d.metadata.name)).toMatchObject(selector);
    }
  });

  it("the StatefulSet: a headless Service, node id from the pod name, advertised under that Service, a PVC for data_dir", () => {
    const peers = find("Service", sts.spec.serviceName)!;
    expect(peers.spec.clusterIP).toBe("None");
    const env = Object.fromEntries((container.env as Doc[]).map((e) => [e.name, e]));
    for (const name of Object.keys(env).filter((n) => n.startsWith("CONVEYOR_"))) expect(KNOWN_ENV_VARS).toContain(name);
    expect(env.POD_NAME.valueFrom.fieldRef.fieldPath).toBe("metadata.name");
    expect(env.CONVEYOR_NODE_ID.value).toBe("$(POD_NAME)");
    expect(env.CONVEYOR_CLUSTER_ADVERTISE.value).toBe(`$(POD_NAME).${peers.metadata.name}.$(POD_NAMESPACE).svc.cluster.local:7233`);
    const config = loadConfigText(configMap.data["conveyor.yaml"], { CONVEYOR_NODE_ID: "conveyor-0", CONVEYOR_CLUSTER_ADVERTISE: "conveyor-0.x:7233" });
    expect(config.nodeId).toBe("conveyor-0");
    const mounts = new Map((container.volumeMounts as Doc[]).map((m) => [m.mountPath, m.name]));
    expect(sts.spec.volumeClaimTemplates.map((t: Doc) => t.metadata.name)).toContain(mounts.get(config.dataDir));
    for (const flag of flagsOf(container.args)) expect(CONVEYORD_FLAGS).toContain(flag);
    expect(mounts.get(container.args[container.args.indexOf("--config") + 1])).toBe("config");
    // auth_file and the TLS files sit in mounted Secrets that hold those keys.
    const volumes = new Map((pod.volumes as Doc[]).map((v) => [v.name, v]));
    for (const path of [config.authFile, config.clusterSecretFile, config.tlsCert, config.tlsKey, config.clusterTlsCa]) {
      const volume = volumes.get(mounts.get(dirname(path))!);
      expect(volume?.secret, path).toBeDefined();
      expect(Object.keys(find("Secret", volume!.secret.secretName)!.stringData)).toContain(path.split("/").at(-1));
    }
    for (const m of container.volumeMounts as Doc[]) {
      const known = volumes.has(m.name) || sts.spec.volumeClaimTemplates.some((t: Doc) => t.metadata.name === m.name);
      expect(known, `volumeMount ${m.name}`).toBe(true);
    }
    expect(find("ConfigMap", volumes.get("config")!.configMap.name)).toBeDefined();
  });

  it("readiness on /healthz, and a termination grace longer than the preStop pause plus shutdown_grace", () => {
    const ports = (container.ports as Doc[]).map((p) => p.name);
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      expect(probe.httpGet.path).toBe("/healthz");
      expect(ports).toContain(probe.httpGet.port);
    }
    const config = loadConfigText(configMap.data["conveyor.yaml"]);
    expect(container.readinessProbe.httpGet.scheme).toBe(config.tlsCert ? "HTTPS" : "HTTP");
    const preStop = container.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe("sleep");
    expect(Number(preStop[1]) * 1000 + config.shutdownGraceMs).toBeLessThan(pod.terminationGracePeriodSeconds * 1000);
  });

  it("a client Service, a PodDisruptionBudget of one, and a dedicated etcd that cluster_etcd points at", () => {
    const client = find("Service", "conveyor")!;
    expect(client.spec.clusterIP).toBeUndefined();
    expect(find("PodDisruptionBudget", "conveyor")!.spec.maxUnavailable).toBe(1);
    const etcd = find("StatefulSet", "etcd")!;
    const etcdCommand = etcd.spec.template.spec.containers[0].command as string[];
    const etcdFlags = etcdHelpFlags();
    for (const flag of flagsOf(etcdCommand)) expect(etcdFlags, flag).toContain(flag);
    const config = loadConfigText(configMap.data["conveyor.yaml"]);
    const urls = config.clusterEtcd.split(",").map((u) => new URL(u));
    expect(urls).toHaveLength(etcd.spec.replicas);
    urls.forEach((url, i) => expect(url.hostname).toBe(`${etcd.metadata.name}-${i}.${etcd.spec.serviceName}`));
  });

  const kubectl = spawnSync("kubectl", ["version", "--client"], { timeout: 20_000 }).status === 0;
  it.skipIf(!kubectl)("kubectl kustomize builds the manifests", () => {
    const result = spawnSync("kubectl", ["kustomize", join(DEPLOY, "kubernetes")], { encoding: "utf8", timeout: 60_000 });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(parseAllDocuments(result.stdout).length).toBe(docs.length);
  });
});

/**
 * nats-server's configuration format, as far as deploy/ uses it: `key: value` (or `=`),
 * `key { ... }` blocks and `key: [ ... ]` lists (one item a line, or inline), full-line
 * comments, quoted strings, and `$NAME` values read from the server's environment (as
 * nats-server resolves them). Anything else throws, so that this reading cannot quietly
 * differ from the server's; `nats-server -t` checks the rest.
 */
interface NatsBlock { [key: string]: string | string[] | NatsBlock }
function natsConf(text: string, env: Record<string, string>, where: string): NatsBlock {
  const root: NatsBlock = {};
  const stack: NatsBlock[] = [root];
  let list: string[] | undefined;
  const scalar = (raw: string, line: number): string => {
    const v = raw.trim();
    if (v.startsWith("$")) {
      const value = env[v.slice(1)];
      if (value === undefined) throw new Error(`${where}:${line}: ${v} is not in the server's environment`);
      return value;
    }
    if (!/^("[^"]*"|[^\s"{}[\],#]+)$/.test(v)) throw new Error(`${where}:${line}: cannot read ${JSON.stringify(v)}`);
    return v.replace(/^"(.*)"$/, "$1");
  };
  text.split("\n").forEach((line, i) => {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) return;
    if (list) {
      if (t === "]") list = undefined;
      else list.push(scalar(t.replace(/,$/, ""), i + 1));
      return;
    }
    if (t === "}") {
      stack.pop();
      if (stack.length === 0) throw new Error(`${where}:${i + 1}: unmatched }`);
      return;
    }
    const m = /^([a-z_]+)\s*(?:[:=]\s*)?(.*)$/.exec(t);
    if (!m || m[2] === "") throw new Error(`${where}:${i + 1}: cannot read ${JSON.stringify(t)}`);
    const [, key, rest] = m as unknown as [string, string, string];
    const block = stack.at(-1)!;
    if (key in block) throw new Error(`${where}:${i + 1}: ${key} twice`);
    if (rest === "{") stack.push((block[key] = {}));
    else if (rest === "[") block[key] = list = [];
    else if (rest.startsWith("[") && rest.endsWith("]")) block[key] = rest.slice(1, -1).split(",").map((v) => scalar(v, i + 1));
    else block[key] = scalar(rest, i + 1);
  });
  if (stack.length !== 1 || list) throw new Error(`${where}: a block or list is not closed`);
  return root;
}
const natsBlock = (conf: NatsBlock, key: string): NatsBlock => {
  const v = conf[key];
  if (typeof v !== "object" || Array.isArray(v)) throw new Error(`${key} is not a block`);
  return v;
};
const natsString = (conf: NatsBlock, key: string): string => {
  const v = conf[key];
  if (typeof v !== "string") throw new Error(`${key} is not set (or not a value)`);
  return v;
};

/** A nats-server size ("8MB", "20GB", "10Gi" of Kubernetes too) in bytes; nats-server's units are binary. */
function sizeBytes(value: string): number {
  const m = /^(\d+)\s*(K|M|G|T)?(B|i)?$/i.exec(value.trim());
  if (!m) throw new Error(`cannot read ${JSON.stringify(value)} as a size`);
  return Number(m[1]) * 1024 ** (m[2] ? "KMGT".indexOf(m[2].toUpperCase()) + 1 : 0);
}

/** "host:port" of a listen or advertise value, or of a URL. */
const hostPort = (value: string) => (value.includes("://") ? new URL(value).host : value);
const portOf = (value: string) => Number(hostPort(value).split(":").at(-1));

/** One nats-server of a deployment: its config as shipped, the environment it runs with, the names others reach it by. */
interface NatsServerSpec { where: string; file: string; text: string; env: Record<string, string>; hosts: string[] }
interface NatsDeployment { name: string; servers: NatsServerSpec[]; clusterNats: string[][] }

let testCertsCache: { cert: string; key: string; ca: string } | undefined;
/**
 * `nats-server -t -c` on a config, in the server's environment only. nats-server loads the
 * TLS files it names, which exist only on the target machines: test certificates (a CA and
 * a certificate for client and server use) stand in for them.
 */
function natsConfigTest(text: string, env: Record<string, string>): { ok: boolean; output: string } {
  const dir = mkdtempSync(join(tmpdir(), "conveyor-nats-conf-"));
  let conf = text;
  if (/^\s*(cert_file|key_file|ca_file):/m.test(text)) {
    if (!testCertsCache) {
      const certs = makeCerts();
      const node = certs.node("nats", "DNS:localhost");
      testCertsCache = { cert: node.cert, key: node.key, ca: certs.caCert };
    }
    const stand = { cert_file: testCertsCache.cert, key_file: testCertsCache.key, ca_file: testCertsCache.ca };
    conf = text.replace(/^(\s*)(cert_file|key_file|ca_file):.*$/gm, (_, indent: string, key: keyof typeof stand) => `${indent}${key}: "${stand[key]}"`);
  }
  const file = join(dir, "nats-server.conf");
  writeFileSync(file, conf);
  const result = spawnSync(natsBinary(), ["-t", "-c", file], { encoding: "utf8", env, timeout: 10_000 });
  return { ok: result.status === 0, output: `${result.stdout}${result.stderr}`.trim() };
}

/** The version of the nats-server binary the tests run ("2.9.10"). */
function natsVersion(): string {
  const out = spawnSync(natsBinary(), ["--version"], { encoding: "utf8" });
  const m = /v(\d+\.\d+\.\d+)/.exec(`${out.stdout}${out.stderr}`);
  expect(m, "nats-server --version").not.toBeNull();
  return m![1]!;
}

/** The environment of a container as the kubelet gives it: fieldRefs of the pod, then $(VAR) expanded from earlier entries. */
function podEnv(container: Doc, pod: { name: string; namespace: string }): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container.env as Doc[]) {
    const ref = e.valueFrom?.fieldRef?.fieldPath;
    if (ref) env[e.name] = ref === "metadata.name" ? pod.name : ref === "metadata.namespace" ? pod.namespace : "";
    else env[e.name] = String(e.value).replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (all, name: string) => env[name] ?? all);
  }
  return env;
}

/** The three deployments' nats-server and conveyor configs, read as each target reads them. */
function natsDeployments(): NatsDeployment[] {
  // Three VMs: one file each; conveyor's shared config with each node's env file.
  const systemd: NatsDeployment = {
    name: "systemd",
    servers: [1, 2, 3].map((n) => {
      const file = `deploy/systemd/nats/nats-${n}.conf`;
      return { where: file, file, text: read(file), env: {}, hosts: [`conveyor-${n}.internal`] };
    }),
    clusterNats: [1, 2, 3].map((n) => parseNatsUrls(loadConfigText(read("deploy/systemd/conveyor-cluster.yaml"), envFile(`deploy/systemd/node-${n}.env`)).clusterNats)),
  };
  // Compose: each nats service's mounted config with the service's environment, reached by its service name.
  const composeDir = join(DEPLOY, "compose");
  const services = yamlDocs("deploy/compose/docker-compose.yml")[0]!.services as Record<string, Doc>;
  const mounts = (s: Doc) => new Map((s.volumes as string[]).map((v) => [v.split(":")[1]!, v.split(":")[0]!]));
  const compose: NatsDeployment = {
    name: "Docker Compose",
    servers: Object.entries(services).filter(([, s]) => String(s.image ?? "").startsWith("nats:")).map(([name, s]) => {
      const command = s.command as string[];
      const source = mounts(s).get(command[command.indexOf("--config") + 1]!)!;
      const file = relative(REPO_ROOT, resolve(composeDir, source));
      return { where: `${file} (${name})`, file, text: read(file), env: { ...(s.environment ?? {}) }, hosts: [name] };
    }),
    clusterNats: Object.values(services).filter((s) => s.build).map((s) => {
      const command = s.command as string[];
      return parseNatsUrls(loadConfigText(readFileSync(resolve(composeDir, mounts(s).get(command[command.indexOf("--config") + 1]!)!), "utf8")).clusterNats);
    }),
  };
  // Kubernetes: the ConfigMap file the StatefulSet's --config names, with each pod's environment, reached under the headless Service.
  const kustomization = yamlDocs("deploy/kubernetes/kustomization.yaml")[0]!;
  const docs: Doc[] = (kustomization.resources as string[]).flatMap((f) => yamlDocs(`deploy/kubernetes/${f}`).map((d) => ({ ...d, file: `deploy/kubernetes/${f}` })));
  const sts = docs.find((d) => d.kind === "StatefulSet" && d.metadata.name === "nats")!;
  const container = sts.spec.template.spec.containers[0];
  const configPath = container.command[container.command.indexOf("--config") + 1] as string;
  const mount = (container.volumeMounts as Doc[]).find((m) => configPath.startsWith(`${m.mountPath}/`))!;
  const volume = (sts.spec.template.spec.volumes as Doc[]).find((v) => v.name === mount.name)!;
  const configMap = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === volume.configMap.name)!;
  const key = configPath.slice(mount.mountPath.length + 1);
  const kubernetes: NatsDeployment = {
    name: "Kubernetes",
    servers: Array.from({ length: sts.spec.replicas }, (_, i) => {
      const pod = `${sts.metadata.name}-${i}`;
      return {
        where: `${configMap.file} ConfigMap ${configMap.metadata.name} ${key} (${pod})`, file: configMap.file, text: configMap.data[key],
        env: podEnv(container, { name: pod, namespace: kustomization.namespace }), hosts: [`${pod}.${sts.spec.serviceName}`],
      };
    }),
    clusterNats: [parseNatsUrls(loadConfigText(docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === "conveyor-config")!.data["conveyor.yaml"]).clusterNats)],
  };
  return [systemd, compose, kubernetes];
}

describe("deploy/ nats-server (the changelog)", () => {
  const deployments = natsDeployments();

  it("checks every nats-server configuration in deploy/", () => {
    const checked = new Set(deployments.flatMap((d) => d.servers.map((s) => s.file)));
    for (const f of deployFiles) if (/^\s*(jetstream|max_payload)\b/m.test(read(f))) expect(checked, f).toContain(f);
    for (const d of deployments) {
      expect(d.servers, d.name).toHaveLength(3);
      expect(d.clusterNats.length, d.name).toBeGreaterThan(0);
    }
  });

  it("the configuration test tells a bad config (the check below means something)", () => {
    // Compose's shared file, whose server_name comes from the service's environment.
    const [server] = deployments[1]!.servers;
    expect(natsConfigTest(server!.text, server!.env).ok).toBe(true);
    expect(natsConfigTest(`${server!.text}\nmax_payloads: 8MB\n`, server!.env)).toMatchObject({ ok: false, output: expect.stringContaining("unknown field") });
    expect(natsConfigTest(server!.text, {}).output).toContain("can not be found");
  });

  describe.each(deployments.map((d) => [d.name, d] as const))("%s: the three servers", (_, deployment) => {
    const confs = deployment.servers.map((s) => natsConf(s.text, s.env, s.where));

    it.each(deployment.servers.map((s) => [s.where, s] as const))("nats-server -t accepts %s", (_, server) => {
      const result = natsConfigTest(server.text, server.env);
      expect(result.output).toMatch(/configuration file .* is valid/);
      expect(result.ok).toBe(true);
    });

    it("max_payload is the changelog's 8MB on every server", () => {
      for (const [i, conf] of confs.entries()) {
        expect(natsString(conf, "max_payload"), deployment.servers[i]!.where).toBe("8MB");
        expect(sizeBytes(natsString(conf, "max_payload"))).toBe(NATS_MAX_PAYLOAD_REQUIRED);
      }
    });

    it("three JetStream servers, each with its own name, in one cluster with routes to the other two", () => {
      const names = confs.map((c) => natsString(c, "server_name"));
      expect(new Set(names).size).toBe(3);
      expect(new Set(confs.map((c) => natsString(natsBlock(c, "cluster"), "name"))).size).toBe(1);
      // Where each server's routes listen, by the names the others know it by.
      const routeAddresses = deployment.servers.map((s, i) => s.hosts.map((h) => `${h}:${portOf(natsString(natsBlock(confs[i]!, "cluster"), "listen"))}`));
      for (const [i, conf] of confs.entries()) {
        expect(natsString(natsBlock(conf, "jetstream"), "store_dir")).toMatch(/^\//);
        const cluster = natsBlock(conf, "cluster");
        const routes = (cluster.routes as string[]).map((r) => {
          expect(r).toMatch(/^nats-route:\/\//);
          return hostPort(r);
        });
        const targets = routes.map((r) => routeAddresses.findIndex((addresses) => addresses.includes(r)));
        expect(targets, `${deployment.servers[i]!.where}: every route reaches one of the three (${routes.join(", ")})`).not.toContain(-1);
        for (const other of [0, 1, 2].filter((o) => o !== i)) expect(targets, `${deployment.servers[i]!.where}: a route to server ${other + 1}`).toContain(other);
        // A server advertises its route address under its name, not its IP (where it says so).
        if (cluster.advertise !== undefined) expect(routeAddresses[i]).toContain(natsString(cluster, "advertise"));
        expect(cluster.no_advertise, "clients use cluster_nats, not gossiped addresses").toBe("true");
        expect(natsString(conf, "http"), "a monitoring port").toMatch(/:\d+$/);
      }
    });

    it("every conveyor config's cluster_nats names the three servers' client ports", () => {
      const clientAddresses = deployment.servers.map((s, i) => s.hosts.map((h) => `${h}:${portOf(natsString(confs[i]!, "listen"))}`));
      for (const urls of deployment.clusterNats) {
        expect(urls).toHaveLength(3);
        const targets = urls.map((u) => {
          expect(u).toMatch(/^nats:\/\//);
          return clientAddresses.findIndex((addresses) => addresses.includes(hostPort(u)));
        });
        expect(targets.sort()).toEqual([0, 1, 2]);
      }
    });
  });

  describe("systemd: Debian's nats-server package", () => {
    const dropIn = unitFile("deploy/systemd/nats-server-cluster.conf");
    const confs = [1, 2, 3].map((n) => natsConf(read(`deploy/systemd/nats/nats-${n}.conf`), {}, `nats-${n}.conf`));

    it("the store is the drop-in's state directory; lame duck mode on stop, within TimeoutStopSec", () => {
      for (const conf of confs) {
        expect(natsString(natsBlock(conf, "jetstream"), "store_dir")).toBe(`/var/lib/${last(dropIn, "Service", "StateDirectory")}`);
        expect(parseDurationMs(natsString(conf, "lame_duck_duration"))).toBeLessThan(seconds(last(dropIn, "Service", "TimeoutStopSec")!) * 1000);
        expect(parseDurationMs(natsString(conf, "lame_duck_grace_period"))).toBeLessThan(parseDurationMs(natsString(conf, "lame_duck_duration")));
      }
      // The package's ExecStop (SIGINT, an immediate stop) is cleared; SIGUSR2 is lame duck mode.
      expect(dropIn.get("Service")!.get("ExecStop")).toEqual([""]);
      expect(last(dropIn, "Service", "KillSignal")).toBe("SIGUSR2");
      expect(last(unitFile("deploy/systemd/conveyord-cluster.conf"), "Unit", "After")!.split(/\s+/)).toContain("nats-server.service");
    });

    it("TLS on the client port and mutual TLS on the routes, with the files each header installs", () => {
      for (const [i, conf] of confs.entries()) {
        const text = read(`deploy/systemd/nats/nats-${i + 1}.conf`);
        const tls = natsBlock(conf, "tls");
        const routeTls = natsBlock(natsBlock(conf, "cluster"), "tls");
        expect(routeTls.verify).toBe("true");
        for (const path of [tls.cert_file, tls.key_file, routeTls.cert_file, routeTls.key_file, routeTls.ca_file] as string[]) {
          expect(text, `nats-${i + 1}.conf installs ${path}`).toMatch(new RegExp(`^#\\s+sudo install .* ${path.replace(/[.]/g, "\\.")}(\\s|$)`, "m"));
        }
      }
      // conveyord trusts the servers' CA through NODE_EXTRA_CA_CERTS (Node's TLS, which the NATS client uses).
      for (const n of [1, 2, 3]) expect(envFile(`deploy/systemd/node-${n}.env`).NODE_EXTRA_CA_CERTS).toBeTruthy();
    });

    const analyze = spawnSync("systemd-analyze", ["--version"]).status === 0;
    it.skipIf(!analyze)("systemd-analyze verify accepts Debian's nats-server unit with the drop-in", () => {
      // The unit of the package the binary comes from (unpacked next to it, or installed).
      const bin = natsBinary();
      const debianUnit = [join(dirname(dirname(dirname(bin))), "lib/systemd/system/nats-server.service"), "/lib/systemd/system/nats-server.service"].find((f) => existsSync(f));
      expect(debianUnit, `Debian's nats-server.service next to ${bin}`).toBeDefined();
      const unitText = readFileSync(debianUnit!, "utf8");
      // It reads the file the headers install the configs as.
      expect(unitText).toMatch(/^ExecStart=\/usr\/sbin\/nats-server -c \/etc\/nats-server\.conf$/m);
      for (const n of [1, 2, 3]) expect(read(`deploy/systemd/nats/nats-${n}.conf`)).toContain(`nats/nats-${n}.conf /etc/nats-server.conf`);
      const dir = mkdtempSync(join(tmpdir(), "conveyor-units-"));
      // As for conveyord: the binary on this machine stands in for /usr/sbin/nats-server.
      writeFileSync(join(dir, "nats-server.service"), unitText.replace("ExecStart=/usr/sbin/nats-server ", `ExecStart=${bin} `));
      mkdirSync(join(dir, "nats-server.service.d"));
      cpSync(join(DEPLOY, "systemd/nats-server-cluster.conf"), join(dir, "nats-server.service.d/cluster.conf"));
      const result = spawnSync("systemd-analyze", ["verify", join(dir, "nats-server.service")], {
        encoding: "utf8", env: { ...process.env, SYSTEMD_UNIT_PATH: `${dir}:` },
      });
      const ours = `${result.stdout}${result.stderr}`.split("\n").filter((l) => l.includes(dir) || l.includes("nats-server"));
      expect(ours).toEqual([]);
      expect(result.status).toBe(0);
    });
  });

  describe("Docker Compose: the nats services", () => {
    const compose = yamlDocs("deploy/compose/docker-compose.yml")[0]!;
    const services = compose.services as Record<string, Doc>;
    const nats = Object.entries(services).filter(([, s]) => String(s.image ?? "").startsWith("nats:"));

    it("three nats-server of the tested version, stores on named volumes, lame duck mode within stop_grace_period, health on /healthz", () => {
      expect(nats.map(([name]) => name)).toEqual(["nats-1", "nats-2", "nats-3"]);
      const version = natsVersion();
      const volumes = new Set<string>();
      for (const [name, s] of nats) {
        expect(s.image, `${name} runs the nats-server version its config is tested with`).toMatch(new RegExp(`^nats:${version.replace(/\./g, "\\.")}(-|$)`));
        const command = s.command as string[];
        const configTarget = command[command.indexOf("--config") + 1]!;
        const mounts = new Map((s.volumes as string[]).map((v) => [v.split(":")[1]!, v.split(":")[0]!]));
        const conf = natsConf(readFileSync(resolve(DEPLOY, "compose", mounts.get(configTarget)!), "utf8"), s.environment ?? {}, name);
        const store = mounts.get(natsString(natsBlock(conf, "jetstream"), "store_dir"))!;
        expect(Object.keys(compose.volumes), `${name}: store_dir is a named volume`).toContain(store);
        volumes.add(store);
        expect(s.stop_signal).toBe("SIGUSR2");
        expect(parseDurationMs(natsString(conf, "lame_duck_duration"))).toBeLessThan(parseDurationMs(s.stop_grace_period));
        expect(s.healthcheck.test.join(" ")).toContain(`127.0.0.1:${portOf(natsString(conf, "http"))}/healthz`);
      }
      expect(volumes.size).toBe(3);
      // Every conveyor node waits for every nats-server to be healthy.
      for (const [name, s] of Object.entries(services).filter(([, s]) => s.build)) {
        for (const [n] of nats) expect(s.depends_on?.[n], `${name} depends on ${n}`).toEqual({ condition: "service_healthy" });
      }
    });
  });

  describe("Kubernetes: the nats StatefulSet", () => {
    const kustomization = yamlDocs("deploy/kubernetes/kustomization.yaml")[0]!;
    const docs = (kustomization.resources as string[]).flatMap((f) => yamlDocs(`deploy/kubernetes/${f}`));
    const find = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata?.name === name);
    const sts = find("StatefulSet", "nats")!;
    const pod = sts.spec.template.spec;
    const container = pod.containers[0];

    it("a StatefulSet of three of the tested version: headless and client Services, a PVC per pod for the store, a PodDisruptionBudget of one", () => {
      expect(sts.spec.replicas).toBe(3);
      expect(container.image).toMatch(new RegExp(`^nats:${natsVersion().replace(/\./g, "\\.")}(-|$)`));
      const peers = find("Service", sts.spec.serviceName)!;
      expect(peers.spec.clusterIP).toBe("None");
      expect(peers.spec.publishNotReadyAddresses, "routes form before any server is ready").toBe(true);
      const client = find("Service", "nats")!;
      expect(client.spec.clusterIP).toBeUndefined();
      expect(find("PodDisruptionBudget", "nats")!.spec.maxUnavailable).toBe(1);
      expect(pod.affinity.podAntiAffinity).toBeDefined();
      expect(container.resources.limits.memory).toBeTruthy();
      // The store on the pod's claim, with max_file_store below its size.
      const [server] = natsDeployments()[2]!.servers;
      const conf = natsConf(server!.text, server!.env, server!.where);
      const storeDir = natsString(natsBlock(conf, "jetstream"), "store_dir");
      const mount = (container.volumeMounts as Doc[]).find((m) => m.mountPath === storeDir)!;
      const claim = (sts.spec.volumeClaimTemplates as Doc[]).find((t) => t.metadata.name === mount?.name);
      expect(claim, `${storeDir} is a PersistentVolumeClaim`).toBeDefined();
      expect(sizeBytes(natsString(natsBlock(conf, "jetstream"), "max_file_store"))).toBeLessThan(sizeBytes(claim!.spec.resources.requests.storage));
      // Ports and probes: the monitoring port's /healthz; lame duck mode before SIGTERM, within the grace period.
      const ports = new Map((container.ports as Doc[]).map((p) => [p.name, p.containerPort]));
      expect(ports.get("client")).toBe(portOf(natsString(conf, "listen")));
      expect(ports.get("cluster")).toBe(portOf(natsString(natsBlock(conf, "cluster"), "listen")));
      for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
        expect(probe.httpGet.path).toMatch(/^\/healthz(\?|$)/);
        expect(ports.get(probe.httpGet.port)).toBe(portOf(natsString(conf, "http")));
      }
      expect(container.lifecycle.preStop.exec.command.join(" ")).toContain("nats-server --signal ldm=1");
      expect(parseDurationMs(natsString(conf, "lame_duck_duration"))).toBeLessThan(pod.terminationGracePeriodSeconds * 1000);
      // Only conveyor's pods reach the client port.
      const policy = find("NetworkPolicy", "nats")!;
      expect(policy.spec.ingress.some((r: Doc) => r.from.some((f: Doc) => f.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "conveyor")
        && r.ports.some((p: Doc) => p.port === ports.get("client")))).toBe(true);
    });
  });
});

/** The manual's pages on running a cluster (deploy files, flags, variables). */
const CLUSTER_DOCS = readdirSync(join(REPO_ROOT, "docs/cluster")).filter((f) => f.endsWith(".md")).map((f) => `docs/cluster/${f}`);

let etcdFlagsCache: Set<string> | undefined;
/** `etcd --help`'s flags, from the same etcd the cluster tests run (Debian's 3.4). */
function etcdHelpFlags(): Set<string> {
  if (!etcdFlagsCache) {
    const help = spawnSync(etcdBinary(), ["--help"], { encoding: "utf8" });
    etcdFlagsCache = new Set([...`${help.stdout}${help.stderr}`.matchAll(/^\s+(--[a-z][a-z0-9-]*)/gm)].map((m) => m[1]!));
    expect(etcdFlagsCache.size).toBeGreaterThan(50);
  }
  return etcdFlagsCache;
}
