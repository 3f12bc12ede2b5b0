/**
 * Strings that many packed tasks share (their type, their concurrency key), each kept
 * once and referred to by a small integer. Reference-counted: a string goes when its
 * last task does, so a stream of one-off keys cannot grow the table.
 *
 * Why: a row read from SQLite brings its own copy of every string, so a million pending
 * tasks of one type would otherwise hold a million copies of the type's name.
 */
export class InternTable {
  private readonly codes = new Map<string, number>();
  private readonly strings: string[] = [];
  private readonly refs: number[] = [];
  private readonly free: number[] = [];

  /** The code of `s`, counting one more reference to it. */
  take(s: string): number {
    let code = this.codes.get(s);
    if (code === undefined) {
      code = this.free.pop() ?? this.strings.length;
      this.codes.set(s, code);
      this.strings[code] = s;
      this.refs[code] = 0;
    }
    this.refs[code]! += 1;
    return code;
  }

  /** One more reference to a code in use (for a caller that knows the code of its string). */
  takeAgain(code: number): number {
    this.refs[code]! += 1;
    return code;
  }

  /** The string of a code in use. */
  at(code: number): string {
    return this.strings[code]!;
  }

  /** Drops one reference; the string goes with its last one (then true: the code is free). */
  release(code: number): boolean {
    const left = (this.refs[code]! -= 1);
    if (left > 0) return false;
    this.codes.delete(this.strings[code]!);
    this.strings[code] = "";
    this.free.push(code);
    return true;
  }

  /** Distinct strings held (for tests). */
  get size(): number {
    return this.codes.size;
  }
}
