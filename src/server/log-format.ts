/**
 * conveyord's logger: pino, writing JSON lines (for log shippers) or, in the pretty mode,
 * one human line per entry:
 *
 *   2026-11-30T22:51:07.412Z INFO  conveyord listening grpc=127.0.0.1:7233 http=127.0.0.1:8080
 *   2026-11-30T22:51:09.015Z WARN  task attempt failed queue=emails type=email:send id=5f0c… attempt=1 error="timeout"
 *
 * pino-pretty is not a dependency; this small formatter reads pino's own JSON line, so
 * both modes carry exactly the same fields. "auto" is pretty when stdout is a terminal.
 */
import { pino, type Logger } from "pino";
import type { LogFormat } from "./config.js";

const LEVEL_NAMES: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };
/** Fields every line has, shown in the line's head (time, level, message) or not at all. */
const HEAD_FIELDS = new Set(["time", "level", "msg", "pid", "hostname"]);

/** A value as `key=value` shows it: bare when it is one plain word, JSON otherwise. */
function formatValue(value: unknown): string {
  if (typeof value === "string") return /^[\w.:/@+-]+$/.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/** One pino JSON line as a human line; an error's stack follows on indented lines. */
export function prettyLine(jsonLine: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(jsonLine) as Record<string, unknown>;
  } catch {
    return jsonLine.endsWith("\n") ? jsonLine : `${jsonLine}\n`;
  }
  const time = typeof entry.time === "number" ? new Date(entry.time).toISOString() : "";
  const level = (LEVEL_NAMES[entry.level as number] ?? String(entry.level)).padEnd(5);
  let stack = "";
  const fields: string[] = [];
  for (const [key, value] of Object.entries(entry)) {
    if (HEAD_FIELDS.has(key)) continue;
    if (key === "err" && value && typeof value === "object") {
      const err = value as { message?: string; stack?: string; type?: string };
      fields.push(`err=${formatValue(err.message ?? err.type ?? "error")}`);
      if (err.stack) stack = `\n${err.stack.split("\n").map((l) => `    ${l.trim()}`).join("\n")}`;
      continue;
    }
    fields.push(`${key}=${formatValue(value)}`);
  }
  return `${[time, level, String(entry.msg ?? ""), ...fields].filter((p) => p !== "").join(" ")}${stack}\n`;
}

/** Whether a format setting means pretty lines, given whether stdout is a terminal. */
export function isPretty(format: LogFormat, stdoutIsTty: boolean): boolean {
  return format === "pretty" || (format === "auto" && stdoutIsTty);
}

export function createLogger(options: { level: string; format: LogFormat; nodeId: string }): Logger {
  const settings = { level: options.level, base: { node: options.nodeId } };
  if (!isPretty(options.format, process.stdout.isTTY === true)) return pino(settings);
  return pino(settings, { write: (line: string) => void process.stdout.write(prettyLine(line)) });
}
