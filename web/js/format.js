// Formatting of protobuf JSON values (int64 arrive as strings, bytes as base64).

export const STATES = ["scheduled", "pending", "aggregating", "active", "retry", "completed", "archived", "cancelled"];
export const UNFINISHED = ["scheduled", "pending", "aggregating", "active", "retry"];

/** "TASK_STATE_PENDING" → "pending". */
export function stateName(wire) {
  if (typeof wire !== "string") return "unspecified";
  return wire.replace(/^TASK_STATE_/, "").toLowerCase();
}

/** "pending" → "TASK_STATE_PENDING". */
export function stateWire(name) {
  return `TASK_STATE_${String(name).toUpperCase()}`;
}

/** An int64/uint64 JSON value (string or number) as a number. */
export function toNum(v) {
  const n = Number(v ?? 0);
  return Number.isFinite(n) ? n : 0;
}

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 2 });

export function count(v) {
  return integer.format(toNum(v));
}

export function rate(v) {
  return decimal.format(v);
}

export function percent(fraction) {
  if (!Number.isFinite(fraction)) return "—";
  return `${decimal.format(fraction * 100)} %`;
}

function pad(n) {
  return String(n).padStart(2, "0");
}

/** The browser's zone at an instant, as the browser abbreviates it: "UTC", "CET", "GMT+2". */
export function zoneName(date) {
  const part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(date).find((p) => p.type === "timeZoneName");
  return part?.value ?? "";
}

/** Epoch ms (int64 JSON) as local "YYYY-MM-DD HH:MM:SS ZONE"; 0 is "—". */
export function timestamp(ms) {
  const n = toNum(ms);
  if (n === 0) return "—";
  const d = new Date(n);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zoneName(d)}`;
}

/** Local "HH:MM:SS ZONE". */
export function clock(date) {
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())} ${zoneName(date)}`;
}

/** "3 min ago" / "in 20 s". */
export function relative(ms, now = Date.now()) {
  const n = toNum(ms);
  if (n === 0) return "";
  const delta = n - now;
  const abs = Math.abs(delta);
  const text = abs < 1_000 ? "now" : duration(abs);
  if (text === "now") return text;
  return delta < 0 ? `${text} ago` : `in ${text}`;
}

/** Milliseconds as "1 h 2 min", "30 s", "250 ms"; 0 is "—". */
export function duration(ms) {
  let n = toNum(ms);
  if (n === 0) return "—";
  if (n < 1_000) return `${n} ms`;
  const parts = [];
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["min", 60_000], ["s", 1_000]]) {
    if (n >= size) {
      parts.push(`${Math.floor(n / size)} ${unit}`);
      n %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}

export function bytesFromBase64(b64) {
  if (!b64) return new Uint8Array();
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * How to show payload/result bytes: pretty JSON when they parse as JSON, text when they
 * are UTF-8, otherwise a hex dump of the first bytes.
 */
export function describeBytes(b64, contentType = "") {
  const bytes = bytesFromBase64(b64);
  if (bytes.length === 0) return { kind: "empty", text: "", size: 0 };
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    const hex = [...bytes.slice(0, 512)].map((b) => b.toString(16).padStart(2, "0"));
    const lines = [];
    for (let i = 0; i < hex.length; i += 16) lines.push(hex.slice(i, i + 16).join(" "));
    return { kind: "binary", text: lines.join("\n") + (bytes.length > 512 ? "\n…" : ""), size: bytes.length };
  }
  const looksJson = /json/i.test(contentType) || /^\s*[[{"]/.test(text) || /^\s*(-?\d|true|false|null)/.test(text);
  if (looksJson) {
    try {
      return { kind: "json", text: JSON.stringify(JSON.parse(text), null, 2), size: bytes.length };
    } catch {
      // not JSON after all: show it as text
    }
  }
  return { kind: "text", text, size: bytes.length };
}

export function byteSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${decimal.format(n / 1024)} KiB`;
  return `${decimal.format(n / 1024 / 1024)} MiB`;
}

// Durations as operators type them (the CLI's syntax, src/base/duration.ts): "500ms",
// "5s", "2m", "1h", "1d" or combinations such as "1m30s"; a bare number is milliseconds.
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "2m" → 120000. Throws an Error whose message says what is wrong. */
export function parseDuration(text) {
  const trimmed = String(text).trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const part = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let consumed = 0;
  for (let m = part.exec(trimmed); m; m = part.exec(trimmed)) {
    total += Number(m[1]) * UNIT_MS[m[2]];
    consumed = part.lastIndex;
  }
  if (trimmed === "" || consumed !== trimmed.length) {
    throw new Error(`invalid duration ${JSON.stringify(String(text))}: use e.g. 500ms, 5s, 2m, 1h, 1d`);
  }
  return Math.round(total);
}

/** The same syntax back, shortest form: 90000 → "1m30s", 1500 → "1.5s", 20 → "20ms". */
export function compactDuration(ms) {
  const n = toNum(ms);
  if (n < 1_000) return `${Math.round(n)}ms`;
  if (n < 60_000) return `${+(n / 1_000).toFixed(1)}s`;
  const parts = [];
  let rest = Math.round(n / 1_000);
  for (const [unit, size] of [["d", 86_400], ["h", 3_600], ["m", 60], ["s", 1]]) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  return parts.join("");
}
