/**
 * How deep a JSON body nests, followed chunk by chunk as it arrives, before JSON.parse:
 * a body of a million open brackets is 2 MB (under the JSON API's size limit) but makes
 * JSON.parse and then protobuf-es's fromJson build and walk a million levels, ~0.7 s of
 * the node's only thread. Once past the limit the rest of the body need not be kept.
 * Brackets inside strings do not count; the text need not be valid JSON (the parser that
 * runs next says what else is wrong). Works on UTF-8 bytes: the characters it looks at
 * are ASCII, and no byte of a multi-byte character is below 0x80.
 */
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export class JsonNesting {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Set once the body has nested deeper than the limit (it stays set). */
  exceeded = false;

  constructor(private readonly maxDepth: number) {}

  /** Follows the next bytes of the body; returns `exceeded`. */
  feed(bytes: Uint8Array): boolean {
    if (this.exceeded) return true;
    for (let i = 0; i < bytes.length; i++) {
      const c = bytes[i]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) this.inString = false;
      } else if (c === QUOTE) {
        this.inString = true;
      } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
        if (++this.depth > this.maxDepth) return (this.exceeded = true);
      } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
        this.depth--;
      }
    }
    return false;
  }
}
