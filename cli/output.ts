/**
 * Printing: tables and key/value listings for people, JSON for machines (the JSON
 * API's dialect), and the time formatting they share.
 */
import type { DescMessage, JsonValue, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { formatDurationMs } from "../src/base/duration.js";
import { toApiJson } from "../src/rpc/json-dialect.js";
import { renderTable, terminalWidth, type Align } from "./table.js";

/** Where the CLI writes; process streams by default, swappable for tests. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: Io = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

export function printLine(io: Io, text: string): void {
  io.out(`${text}\n`);
}

/** On stderr (also with --json): a setting was made on a new queue whose name is near an existing one. */
export function warnSimilarQueue(io: Io, queue: string, similar: string): void {
  if (similar) io.err(`warning: queue ${JSON.stringify(queue)} had no tasks or settings before; did you mean ${JSON.stringify(similar)}?\n`);
}

// ---------------------------------------------------------------------------------
// Tables and listings

/** A plain aligned table (table.ts), cut to the terminal's width when there is one; `align` per column, left by default. */
export function printTable(io: Io, head: string[], rows: string[][], align: Align[] = []): void {
  printLine(io, renderTable(head, rows, align, terminalWidth()));
}

/** `key: value` lines with aligned values; multi-line values go below their key, indented. */
export function printFields(io: Io, fields: Array<[string, string]>): void {
  const width = Math.max(...fields.map(([key]) => key.length)) + 2;
  for (const [key, value] of fields) {
    if (value.includes("\n")) {
      printLine(io, `${key}:`);
      printLine(io, value.split("\n").map((l) => `  ${l}`).join("\n"));
    } else {
      printLine(io, `${`${key}:`.padEnd(width)}${value}`);
    }
  }
}

/** The first line of `text`, cut to `max` characters; an ellipsis marks anything left out. */
export function truncate(text: string, max: number): string {
  const line = text.split("\n", 1)[0] ?? "";
  if (line === text && line.length <= max) return line;
  return `${line.slice(0, max - 1)}…`;
}

/** "-" for an empty string. */
export const orDash = (text: string): string => (text === "" ? "-" : text);

// ---------------------------------------------------------------------------------
// Time

/** A duration cut to its two largest units: 93784000 → "1d2h", 5400 → "5s". */
export function coarseDuration(ms: number): string {
  if (ms < 60_000) return formatDurationMs(Math.floor(ms / 1000) * 1000);
  const parts = formatDurationMs(ms).match(/\d+[a-z]+/g) ?? [];
  return parts.slice(0, 2).join("");
}

/** "5s ago", "in 2m30s", "just now". */
export function relativeTime(atMs: number, nowMs: number = Date.now()): string {
  const diff = nowMs - atMs;
  if (Math.abs(diff) < 1000) return "just now";
  return diff > 0 ? `${coarseDuration(diff)} ago` : `in ${coarseDuration(-diff)}`;
}

/** An epoch-ms instant as ISO plus relative ("2030-01-01T00:00:00.000Z (in 3d4h)"); "-" for zero. */
export function formatInstant(atMs: bigint, nowMs: number = Date.now()): string {
  if (atMs === 0n) return "-";
  const ms = Number(atMs);
  return `${new Date(ms).toISOString()} (${relativeTime(ms, nowMs)})`;
}

/** A duration in ms as "1m30s"; `zero` for 0. */
export function formatDuration(ms: bigint, zero = "none"): string {
  return ms === 0n ? zero : formatDurationMs(Number(ms));
}

// ---------------------------------------------------------------------------------
// Bytes

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The bytes as text if they are valid UTF-8. */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * A payload or result for people: pretty JSON when the content type says JSON or the
 * text parses as JSON, else the text, else base64.
 */
export function formatBody(bytes: Uint8Array, contentType: string): string {
  if (bytes.byteLength === 0) return "-";
  const text = decodeUtf8(bytes);
  if (text === undefined) return `${Buffer.from(bytes).toString("base64")} (base64, ${bytes.byteLength} bytes)`;
  try {
    const parsed: unknown = JSON.parse(text);
    if (/json/i.test(contentType) || (parsed !== null && typeof parsed === "object")) return JSON.stringify(parsed, null, 2);
  } catch {
    // Not JSON: show the text.
  }
  return text;
}

// ---------------------------------------------------------------------------------
// JSON

/** A response message in the JSON API's dialect (src/rpc/json-dialect.ts), pretty-printed. */
export function printMessage<Desc extends DescMessage>(io: Io, schema: Desc, message: MessageShape<Desc>): void {
  printJson(io, toApiJson(schema, message as MessageInitShape<Desc>));
}

/** A value the CLI composes itself (e.g. `{ "queue": "q", "removed": true }`). */
export function printJson(io: Io, value: JsonValue): void {
  printLine(io, JSON.stringify(value, null, 2));
}
