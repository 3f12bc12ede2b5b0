/**
 * The `conveyor` program: global options, the command groups, and running it with
 * every error reported by failure.ts and its exit code taken from exit-codes.ts.
 *
 * A new command group lives in its own file under cli/commands/ as a
 * `register...(program, ctx)` function and is added to COMMAND_GROUPS.
 */
import { Command, CommanderError } from "commander";
import { registerEnqueueCommand } from "./commands/enqueue.js";
import { registerQueueCommands } from "./commands/queue.js";
import { registerTaskCommands } from "./commands/task.js";
import { registerConcurrencyCommands } from "./commands/concurrency.js";
import { registerRateLimitCommands } from "./commands/ratelimit.js";
import { registerGroupCommands } from "./commands/group.js";
import { registerStrategyCommands } from "./commands/strategy.js";
import { registerClusterCommands } from "./commands/cluster.js";
import { registerWorkerCommands } from "./commands/worker.js";
import { registerScheduleCommands } from "./commands/schedule.js";
import { packageInfo } from "../src/version.js";
import { addGlobalOptions, CliContext, installGlobalOptions } from "./context.js";
import { EXIT } from "./exit-codes.js";
import { reportFailure, UsageError } from "./failure.js";

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
  registerWorkerCommands,
  registerScheduleCommands,
];

/**
 * The program, not yet parsed. Commander errors throw CommanderError (exitOverride)
 * instead of exiting, so runCli can close the channel first.
 */
export function buildProgram(
  ctx: CliContext = new CliContext(),
  groups: readonly CommandGroup[] = COMMAND_GROUPS,
  /** Where commander's usage errors go (every subcommand inherits it): stderr by default. */
  onUsageError: (text: string) => void = (text) => ctx.io.err(text),
): Command {
  const program = new Command()
    .name("conveyor")
    .description("Operate a conveyor cluster: queues, tasks, enqueueing, limits.")
    .version(packageInfo().version)
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ writeOut: (t) => ctx.io.out(t), writeErr: (t) => ctx.io.err(t), outputError: onUsageError })
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError();
  addGlobalOptions(program);
  for (const register of groups) register(program, ctx);
  installGlobalOptions(program);
  return program;
}

/** Commander codes of help and version output: printed already, not failures of their own. */
const HELP_CODES: ReadonlySet<string> = new Set(["commander.helpDisplayed", "commander.help", "commander.version"]);

/**
 * Parses and runs `argv` (process.argv shape); resolves to the exit code (exit-codes.ts).
 * Every failure is printed by reportFailure, plain or as JSON; always closes the channel.
 */
export async function runCli(argv: readonly string[], ctx: CliContext = new CliContext()): Promise<number> {
  // Commander's own usage messages are kept here and printed below with the rest, so
  // that --json turns them into JSON too.
  let usage: string | undefined;
  try {
    await buildProgram(ctx, COMMAND_GROUPS, (text) => void (usage = text)).parseAsync([...argv]);
    return EXIT.OK;
  } catch (err) {
    if (err instanceof CommanderError && usage === undefined && HELP_CODES.has(err.code)) {
      return err.exitCode === 0 ? EXIT.OK : EXIT.BAD_INPUT; // `conveyor queue` alone prints help as an error
    }
    // A usage error stops parsing before any command ran, so --json is read from argv.
    const json = ctx.globals.json || argv.slice(2).includes("--json");
    return reportFailure(ctx.io, usage === undefined ? err : new UsageError(usage), { ...ctx.globals, json });
  } finally {
    ctx.close();
  }
}
