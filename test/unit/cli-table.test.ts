/** The CLI's plain tables (cli/table.ts) and its exit-code table (cli/exit-codes.ts). */
import { describe, expect, it } from "vitest";
import { columnWidths, fitCell, renderTable, terminalWidth } from "../../cli/table.js";
import { EXIT, exitCodeOf } from "../../cli/exit-codes.js";
import { describeFailure, UsageError } from "../../cli/failure.js";
import { ConveyorError, type ErrorCode } from "../../src/base/errors.js";

describe("cli tables", () => {
  it("aligns columns two spaces apart, right-aligning where asked, without trailing spaces", () => {
    expect(renderTable(["NAME", "N", "NOTE"], [["alpha", "1", ""], ["b", "100", "x"]], ["left", "right"])).toBe(
      "NAME     N  NOTE\n" +
      "alpha    1\n" +
      "b      100  x");
  });

  it("fits a width by shrinking the widest column first, marking cut cells with …", () => {
    const rows = [["ID", "STATE"], ["0123456789abcdef", "pending"]];
    const text = renderTable(rows[0]!, rows.slice(1), [], 20);
    expect(text.split("\n").map((l) => l.length)).toEqual([expect.any(Number), 20]);
    expect(text).toContain("0123456789…  pending");
  });

  it("never cuts a column below its header (or 4 characters), even if the row stays too wide", () => {
    expect(columnWidths([["STATE", "X"], ["scheduled", "abcdefgh"]], 5)).toEqual([5, 4]);
  });

  it("shows only the first line of a multi-line cell", () => {
    expect(renderTable(["E"], [["first\nsecond"]])).toBe("E\nfirst…");
  });

  it("cuts by characters, not UTF-16 units", () => {
    expect(fitCell("😀😀😀😀", 3)).toBe("😀😀…");
    expect(fitCell("abc", 3)).toBe("abc");
  });

  it("takes the width from COLUMNS, else a terminal on stdout, else none", () => {
    expect(terminalWidth({ COLUMNS: "72" }, { isTTY: false })).toBe(72);
    expect(terminalWidth({ COLUMNS: "wide" }, { isTTY: true, columns: 90 })).toBe(90);
    expect(terminalWidth({}, { isTTY: false, columns: 90 })).toBe(Infinity);
  });
});

describe("cli exit codes", () => {
  const codes: Array<[ErrorCode, number]> = [
    ["INVALID_ARGUMENT", 2], ["NOT_FOUND", 3], ["UNAVAILABLE", 4], ["FAILED_PRECONDITION", 5], ["ALREADY_EXISTS", 5],
    ["RESOURCE_EXHAUSTED", 1], ["INTERNAL", 1],
  ];
  it.each(codes)("%s exits %d", (code, exit) => {
    expect(exitCodeOf(code)).toBe(exit);
  });

  const where = { server: "127.0.0.1:1", timeoutMs: 10_000, json: false };
  it("tells usage errors, unreachable nodes and bugs apart", () => {
    expect(describeFailure(new UsageError("missing --x"), where)).toMatchObject({ exitCode: EXIT.BAD_INPUT, reason: "USAGE", message: "missing --x" });
    expect(describeFailure(new ConveyorError("UNAVAILABLE", "UNREACHABLE", "No connection established"), where)).toMatchObject({ exitCode: EXIT.UNREACHABLE });
    expect(describeFailure(new TypeError("boom"), where)).toMatchObject({ exitCode: EXIT.FAILURE, code: "INTERNAL", message: "boom" });
  });
});
