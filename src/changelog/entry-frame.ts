/**
 * How an entry's records travel in one log message: a count, then each record's length
 * and bytes (big-endian uint32s). The records stay opaque; a record's own format (a
 * versioned protobuf of the turn's effects) is the layer above's business.
 */

/** The framed size of `records`, without building it. */
export function framedBytes(records: readonly Uint8Array[]): number {
  return records.reduce((sum, r) => sum + 4 + r.byteLength, 4);
}

export function frameRecords(records: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(framedBytes(records));
  const view = new DataView(out.buffer);
  view.setUint32(0, records.length);
  let at = 4;
  for (const r of records) {
    view.setUint32(at, r.byteLength);
    out.set(r, at + 4);
    at += 4 + r.byteLength;
  }
  return out;
}

/** The records of a framed entry; throws on bytes that are not one (a foreign or torn message). */
export function unframeRecords(bytes: Uint8Array): Uint8Array[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fail = (why: string) => new Error(`not a changelog entry (${bytes.byteLength} bytes): ${why}`);
  if (bytes.byteLength < 4) throw fail("shorter than its record count");
  const count = view.getUint32(0);
  const records: Uint8Array[] = [];
  let at = 4;
  for (let i = 0; i < count; i++) {
    if (at + 4 > bytes.byteLength) throw fail(`record ${i} has no length`);
    const len = view.getUint32(at);
    if (at + 4 + len > bytes.byteLength) throw fail(`record ${i} runs past the end`);
    records.push(bytes.slice(at + 4, at + 4 + len));
    at += 4 + len;
  }
  if (at !== bytes.byteLength) throw fail(`${bytes.byteLength - at} bytes after the last record`);
  return records;
}
