/**
 * conveyord's logger: pino, writing JSON lines (for log shippers) or, in the pretty mode,
 * human lines through pino-pretty (the pino project's own formatter, so both modes carry
 * exactly the same fields):
 *
 *   [2026-11-30T22:51:07.412Z] INFO: conveyord listening {"node":"n1","grpc":"127.0.0.1:7233",...}
 *   [2026-11-30T22:51:09.015Z] WARN: task attempt failed {"queue":"emails","type":"email:send",...,"error":"timeout"}
 *
 * One line per entry (an error's stack follows, indented); times in UTC with their zone
 * ("Z"), colours only on a terminal. "auto" is pretty when stdout is a terminal.
 */
import { pino, type Logger } from "pino";
import pretty from "pino-pretty";
import type { LogFormat } from "./config.js";

/** Whether a format setting means pretty lines, given whether stdout is a terminal. */
export function isPretty(format: LogFormat, stdoutIsTty: boolean): boolean {
  return format === "pretty" || (format === "auto" && stdoutIsTty);
}

/** pino-pretty's settings for conveyord: one line per entry, UTC times, no pid or host. */
export function prettyOptions(colorize: boolean): pretty.PrettyOptions {
  return {
    colorize,
    singleLine: true,
    translateTime: "UTC:yyyy-mm-dd'T'HH:MM:ss.l'Z'",
    ignore: "pid,hostname",
    // Only `err` is an Error; a task failure's `error` field is its text, kept on the line.
    errorLikeObjectKeys: ["err"],
    // Synchronous, like pino's own stdout writes: a line is out before the process exits.
    sync: true,
  };
}

export function createLogger(options: { level: string; format: LogFormat; nodeId: string }): Logger {
  const settings = { level: options.level, base: { node: options.nodeId } };
  const tty = process.stdout.isTTY === true;
  if (!isPretty(options.format, tty)) return pino(settings);
  return pino(settings, pretty(prettyOptions(tty)));
}
