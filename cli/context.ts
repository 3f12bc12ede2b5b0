/**
 * What every command shares: the global options (--server, --json, --timeout), one
 * lazily opened gRPC channel, and where output goes.
 *
 * Global options are accepted before or after any subcommand (`conveyor --json queue
 * ls` and `conveyor queue ls --json`). Every command parses positionally, so an option
 * after a subcommand name belongs to that subcommand: that is what lets `enqueue
 * --timeout 1m` mean the task's timeout while `conveyor --timeout 30s enqueue ...`
 * sets the RPC deadline. installGlobalOptions gives each subcommand hidden copies of
 * the global options it does not define itself; globalsOf resolves them.
 */
import { Command, Option } from "commander";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { DEFAULT_ADDRESS, RpcChannel, SERVER_ENV_VAR } from "../src/rpc/client.js";
import type { CallOptions, UnaryClient } from "../src/rpc/service-definition.js";
import { readFileSync } from "node:fs";
import { channelSecurity } from "../src/sdk/connection-security.js";
import { positiveDurationArg } from "./options.js";
import { processIo, type Io } from "./output.js";

export const DEFAULT_SERVER = DEFAULT_ADDRESS;
export const DEFAULT_TIMEOUT_MS = 10_000;

export interface GlobalOptions {
  /** host:port of a conveyord node. */
  server: string;
  /** Machine output. */
  json: boolean;
  /** RPC deadline, relative. */
  timeoutMs: number;
  /** Bearer token for a node with an auth file (--token or $CONVEYOR_TOKEN). */
  token?: string | undefined;
  /** TLS: --tls, or implied by --ca / --cert / --key (PEM file paths). */
  tls?: { ca?: string | undefined; cert?: string | undefined; key?: string | undefined } | undefined;
}

/** The global options as defined on the program (with env and defaults). */
function globalOptionDefinitions(): Option[] {
  return [
    new Option("--server <host:port>", "address of a conveyord node").env(SERVER_ENV_VAR).default(DEFAULT_SERVER),
    new Option("--json", "print the response as JSON"),
    new Option("--timeout <duration>", "deadline of each call to the server, e.g. 5s, 1m")
      .argParser(positiveDurationArg).default(DEFAULT_TIMEOUT_MS, "10s"),
    new Option("--token <token>", "bearer token for a node with authentication (prefer $CONVEYOR_TOKEN: a flag shows in ps)").env("CONVEYOR_TOKEN"),
    new Option("--tls", "connect with TLS (implied by --ca, --cert, --key)"),
    new Option("--ca <file>", "PEM file of the CA that signed the node's certificate (default: the system's roots)").env("CONVEYOR_TLS_CA"),
    new Option("--cert <file>", "PEM file of this client's certificate, for a node that requires one (mTLS)").env("CONVEYOR_TLS_CERT"),
    new Option("--key <file>", "PEM file of the client certificate's private key").env("CONVEYOR_TLS_KEY"),
  ];
}

const GLOBAL_KEYS = { server: "server", json: "json", timeoutMs: "timeout", token: "token", tls: "tls", ca: "ca", cert: "cert", key: "key" } as const;

/** Copies of the global options given to subcommands: no env, no default, hidden from help. */
const globalCopies = new WeakSet<Option>();

export function addGlobalOptions(program: Command): void {
  for (const option of globalOptionDefinitions()) program.addOption(option);
}

/**
 * Gives every subcommand of `program` (recursively) hidden copies of the global
 * options, except where the subcommand defines an option with the same flag.
 */
export function installGlobalOptions(program: Command): void {
  const visit = (cmd: Command) => {
    for (const sub of cmd.commands) {
      for (const def of globalOptionDefinitions()) {
        if (sub.options.some((o) => o.long === def.long)) continue;
        const copy = new Option(def.flags, def.description).hideHelp();
        if (def.parseArg) copy.argParser(def.parseArg);
        globalCopies.add(copy);
        sub.addOption(copy);
      }
      visit(sub);
    }
  };
  visit(program);
}

/** The effective global options for the command being run: the nearest command line value wins. */
export function globalsOf(cmd: Command): GlobalOptions {
  const pick = <T>(attribute: string): T => {
    let root = cmd;
    for (let c: Command | null = cmd; c; c = c.parent) {
      root = c;
      const isCopy = c.options.some((o) => o.attributeName() === attribute && globalCopies.has(o));
      if (isCopy && c.getOptionValueSource(attribute) === "cli") return c.getOptionValue(attribute) as T;
    }
    return root.getOptionValue(attribute) as T;
  };
  return {
    server: pick<string>(GLOBAL_KEYS.server),
    json: pick<boolean | undefined>(GLOBAL_KEYS.json) === true,
    timeoutMs: pick<number>(GLOBAL_KEYS.timeoutMs),
    token: pick<string | undefined>(GLOBAL_KEYS.token) || undefined,
    tls: tlsOf(pick<boolean | undefined>(GLOBAL_KEYS.tls), pick<string | undefined>(GLOBAL_KEYS.ca),
      pick<string | undefined>(GLOBAL_KEYS.cert), pick<string | undefined>(GLOBAL_KEYS.key)),
  };
}

function tlsOf(on: boolean | undefined, ca: string | undefined, cert: string | undefined, key: string | undefined): GlobalOptions["tls"] {
  return on || ca || cert || key ? { ca, cert, key } : undefined;
}

/** Token and TLS credentials for the channel; a PEM file that cannot be read is named. */
function channelOptions(globals: GlobalOptions) {
  const read = (flag: string, file: string | undefined) => {
    if (!file) return undefined;
    try {
      return readFileSync(file);
    } catch (e) {
      throw new Error(`${flag} ${file}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (e as Error).message}`);
    }
  };
  const t = globals.tls;
  const tls = t ? withoutUndefined({ ca: read("--ca", t.ca), cert: read("--cert", t.cert), key: read("--key", t.key) }) : undefined;
  return channelSecurity(withoutUndefined({ token: globals.token, tls }));
}

function withoutUndefined<T extends object>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}

/** A connection for one command run. */
export interface Session extends GlobalOptions {
  io: Io;
  /** Options for each call: the RPC deadline. */
  call: CallOptions;
  /** A typed client of `service` over the shared channel. */
  client<S extends GenService<GenServiceMethods>>(service: S): UnaryClient<S>;
}

export class CliContext {
  private channel: RpcChannel | undefined;
  private readonly clients = new Map<string, unknown>();
  /** The last options a command ran with; error messages name the server. */
  globals: GlobalOptions = { server: DEFAULT_SERVER, json: false, timeoutMs: DEFAULT_TIMEOUT_MS, token: undefined };

  constructor(readonly io: Io = processIo) {}

  /** Opens (once) the channel to the server the command names. */
  session(cmd: Command): Session {
    const globals = globalsOf(cmd);
    this.globals = globals;
    const getClient = <S extends GenService<GenServiceMethods>>(service: S): UnaryClient<S> => {
      this.channel ??= new RpcChannel({ address: globals.server, ...channelOptions(globals) });
      let client = this.clients.get(service.typeName);
      if (!client) {
        client = this.channel.service(service);
        this.clients.set(service.typeName, client);
      }
      return client as UnaryClient<S>;
    };
    return { ...globals, io: this.io, call: { timeoutMs: globals.timeoutMs }, client: getClient };
  }

  /** Closes the channel so the process can exit. */
  close(): void {
    this.channel?.close();
    this.channel = undefined;
    this.clients.clear();
  }
}
