/**
 * The `conveyor` CLI entry (bin/conveyor.js imports the built file): runs the program
 * on import. The program itself is built in program.ts.
 */
import { runCli } from "./program.js";

process.exitCode = await runCli(process.argv);
