/**
 * Plain aligned tables, as kubectl and asynq print them: a header row, columns two
 * spaces apart, no borders. Given a width, the widest columns give way first and their
 * long cells end in "…", so every row fits the terminal.
 */
export type Align = "left" | "right";

export const COLUMN_GAP = "  ";
/** A column is never cut below this many characters (nor below its header). */
const MIN_COLUMN_WIDTH = 4;

/** A cell on one line: its first line, "…" when more lines follow. */
function oneLine(cell: string): string {
  const newline = cell.indexOf("\n");
  return newline < 0 ? cell : `${cell.slice(0, newline)}…`;
}

/** `text` cut to `width` characters, the last one "…" when anything was cut. */
export function fitCell(text: string, width: number): string {
  const chars = [...text];
  if (chars.length <= width) return text;
  return width <= 1 ? "…".slice(0, width) : `${chars.slice(0, width - 1).join("")}…`;
}

const length = (text: string) => [...text].length;

/**
 * Column widths for `rows` (header first): each column's widest cell, then, while the
 * row is wider than `maxWidth`, the widest column that can still shrink loses one.
 */
export function columnWidths(rows: readonly string[][], maxWidth = Infinity): number[] {
  const columns = Math.max(0, ...rows.map((r) => r.length));
  const widths = Array.from({ length: columns }, (_, c) => Math.max(0, ...rows.map((r) => length(r[c] ?? ""))));
  const floor = widths.map((_, c) => Math.min(widths[c]!, Math.max(MIN_COLUMN_WIDTH, length(rows[0]?.[c] ?? ""))));
  let total = widths.reduce((a, b) => a + b, 0) + COLUMN_GAP.length * Math.max(0, columns - 1);
  while (total > maxWidth) {
    let widest = -1;
    for (let c = 0; c < columns; c++) {
      if (widths[c]! > floor[c]! && (widest < 0 || widths[c]! > widths[widest]!)) widest = c;
    }
    if (widest < 0) break; // every column at its floor: the row stays wider than the terminal
    widths[widest]!--;
    total--;
  }
  return widths;
}

/** The table as text, one line per row, no trailing spaces; `maxWidth` unset means no cutting. */
export function renderTable(head: readonly string[], rows: readonly string[][], align: readonly Align[] = [], maxWidth = Infinity): string {
  const all = [head, ...rows].map((r) => r.map(oneLine));
  const widths = columnWidths(all, maxWidth);
  return all.map((row) => widths.map((width, c) => {
    const cell = fitCell(row[c] ?? "", width);
    const pad = " ".repeat(width - length(cell));
    return align[c] === "right" ? pad + cell : cell + pad;
  }).join(COLUMN_GAP).trimEnd()).join("\n");
}

/**
 * The width tables must fit: COLUMNS when set (a positive integer), else the terminal's
 * width when stdout is one, else none (piped output is never cut).
 */
export function terminalWidth(env: NodeJS.ProcessEnv = process.env, stdout: { isTTY?: boolean; columns?: number } = process.stdout): number {
  const columns = Number(env.COLUMNS);
  if (Number.isInteger(columns) && columns > 0) return columns;
  if (stdout.isTTY && stdout.columns && stdout.columns > 0) return stdout.columns;
  return Infinity;
}
