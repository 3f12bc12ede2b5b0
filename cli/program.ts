/**
 * The `conveyor` program: global options, the command groups, and running it with
 * errors turned into `error: ...` on stderr and exit code 1.
 *
 * A new command group lives in its own file under cli/commands/ as a
 * `register...(program, ctx)` function and is added to COMMAND_GROUPS.
 */
import { Command, CommanderError } from "commander";
import { ConveyorError } from "../src/base/errors.js";
import { formatDurationMs } from "../src/base/duration.js";
import { registerEnqueueCommand } from "./commands/enqueue.js";
import { registerQueueCommands } from "./commands/queue.js";
import { registerTaskCommands } from "./commands/task.js";
import { registerConcurrencyCommands } from "./commands/concurrency.js";
import { registerRateLimitCommands } from "./commands/ratelimit.js";
import { registerGroupCommands } from "./commands/group.js";
import { registerStrategyCommands } from "./commands/strategy.js";
import { registerClusterCommands } from "./commands/cluster.js";
import { registerScheduleCommands } from "./commands/schedule.js";
import { packageInfo } from "../src/version.js";
import { addGlobalOptions, CliContext, installGlobalOptions, type GlobalOptions } from "./context.js";

export type CommandGroup = (program: Command, ctx: CliContext) => void;

export const COMMAND_GROUPS: readonly CommandGroup[] = [
  registerQueueCommands,
  registerTaskCommands,
  registerEnqueueCommand,
  registerConcurrencyCommands,
  registerRateLimitCommands,
  registerGroupCommands,
  registerStrategyCommands,
  registerClusterCommands,
  registerScheduleCommands,
];

/**
 * The program, not yet parsed. Commander errors throw CommanderError (exitOverride)
 * instead of exiting, so runCli can close the channel first.
 */
export function buildProgram(ctx: CliContext = new CliContext(), groups: readonly CommandGroup[] = COMMAND_GROUPS): Command {
  const program = new Command()
    .name("conveyor")
    .description("Operate a conveyor cluster: queues, tasks, enqueueing, limits.")
    .version(packageInfo().version)
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ writeOut: (t) => ctx.io.out(t), writeErr: (t) => ctx.io.err(t) })
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError();
  addGlobalOptions(program);
  for (const register of groups) register(program, ctx);
  installGlobalOptions(program);
  return program;
}

/** The one-line explanation printed after `error: `. */
export function describeError(err: unknown, globals: GlobalOptions): string {
  if (err instanceof ConveyorError) {
    // UNREACHABLE: the transport failed, not the server. (The server's own UNAVAILABLE
    // errors carry their reason, e.g. GRAIN_DEACTIVATED "queue X was being reloaded;
    // retry", and are printed as the server words them.)
    if (err.reason === "UNREACHABLE") {
      if (/deadline exceeded/i.test(err.message)) {
        return `no answer from conveyor at ${globals.server} within ${formatDurationMs(globals.timeoutMs)} (see --timeout)`;
      }
      return `cannot reach conveyor at ${globals.server} (is conveyord running?)`;
    }
    return err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

/** Parses and runs `argv` (process.argv shape); resolves to the exit code. Always closes the channel. */
export async function runCli(argv: readonly string[], ctx: CliContext = new CliContext()): Promise<number> {
  try {
    await buildProgram(ctx).parseAsync([...argv]);
    return 0;
  } catch (err) {
    // Commander has already printed its message (or the help).
    if (err instanceof CommanderError) return err.exitCode;
    ctx.io.err(`error: ${describeError(err, ctx.globals)}\n`);
    return 1;
  } finally {
    ctx.close();
  }
}
