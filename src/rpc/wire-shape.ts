/**
 * One linear, iterative pass over a request's wire format before protobuf-es decodes it,
 * refusing nesting deeper than REQUEST_NESTING_MAX_DEPTH: messages within messages, and
 * groups (wire types 3 and 4: no conveyor message is written that way, but protobuf-es
 * reads a message field sent as a group, and skips unknown groups, level by level).
 * 4 MiB of the byte 0x0b (a group start of field 1, again and again) cost it ~400 ms of
 * the node's only thread; here it is refused after 32 bytes.
 *
 * It walks tags and lengths only (a message field or a group is entered, everything else
 * is jumped over), so it costs a few microseconds for an ordinary request. Everything it
 * does not refuse is left to protobuf-es exactly as before: bytes that end early, an
 * invalid wire type, an end of group that does not match, all get protobuf-es's own words.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";

const VARINT = 0;
const BIT64 = 1;
const LENGTH_DELIMITED = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const BIT32 = 5;

/** A message (or group) being walked. */
interface Frame {
  /** Where its bytes end: a length-delimited message's end, or its parent's for a group (which ends at its END_GROUP tag). */
  end: number;
  /** For a group: its field number, which the END_GROUP tag repeats. */
  group?: number;
  /** The message of field `no` in this frame, if field `no` holds one. */
  messageOf(no: number): DescMessage | undefined;
}

/** Why the bytes are refused before decoding, or undefined to let protobuf-es decode them. */
export function wireShapeRefusal(schema: DescMessage, bytes: Uint8Array, maxDepth: number): string | undefined {
  const stack: Frame[] = [messageFrame(schema, bytes.length)];
  const tooDeep = `it nests messages deeper than ${maxDepth} levels (the limit)`;
  let pos = 0;
  /** A varint within `end`, or undefined when it runs past it. */
  const varint = (end: number): number | undefined => {
    let value = 0;
    for (let shift = 0, i = 0; i < 10; i++, shift += 7) {
      if (pos >= end) return undefined;
      const b = bytes[pos++]!;
      if (shift < 49) value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
    }
    return undefined;
  };
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (pos >= frame.end) {
      if (pos > frame.end || frame.group !== undefined) return undefined; // cut short: protobuf-es says so
      stack.pop();
      continue;
    }
    const tag = varint(frame.end);
    if (tag === undefined) return undefined;
    const no = Math.floor(tag / 8);
    switch (tag % 8) {
      case VARINT:
        if (varint(frame.end) === undefined) return undefined;
        break;
      case BIT64:
        pos += 8;
        break;
      case BIT32:
        pos += 4;
        break;
      case LENGTH_DELIMITED: {
        const length = varint(frame.end);
        if (length === undefined || pos + length > frame.end) return undefined;
        const message = frame.messageOf(no);
        if (message === undefined) {
          pos += length;
          break;
        }
        if (stack.length >= maxDepth) return tooDeep;
        stack.push(messageFrame(message, pos + length));
        break;
      }
      case START_GROUP: {
        if (stack.length >= maxDepth) return tooDeep;
        const message = frame.messageOf(no);
        stack.push({ ...(message ? messageFrame(message, frame.end) : UNKNOWN_GROUP), end: frame.end, group: no });
        break;
      }
      case END_GROUP:
        if (frame.group !== no) return undefined;
        stack.pop();
        break;
      default:
        return undefined;
    }
  }
  return undefined;
}

/** An unknown field's group: nothing in it is a known message. */
const UNKNOWN_GROUP: Frame = { end: 0, messageOf: () => undefined };

function messageFrame(desc: DescMessage, end: number): Frame {
  const fields = fieldsByNumber(desc);
  return {
    end,
    messageOf(no) {
      const field = fields.get(no);
      if (!field) return undefined;
      switch (field.fieldKind) {
        case "message":
          return field.message;
        case "list":
          return field.listKind === "message" ? field.message : undefined;
        case "map":
          return mapEntryOf(field);
        default:
          return undefined;
      }
    },
  };
}

const byNumber = new WeakMap<DescMessage, Map<number, DescField>>();

function fieldsByNumber(desc: DescMessage): Map<number, DescField> {
  let fields = byNumber.get(desc);
  if (!fields) {
    fields = new Map(desc.fields.map((f) => [f.number, f]));
    byNumber.set(desc, fields);
  }
  return fields;
}

/**
 * A map entry is a message of its own on the wire (key = field 1, value = field 2). It is
 * entered like one (a group inside it is refused too), described by a stand-in whose
 * field 2 is the value's message when the map holds messages.
 */
const entries = new WeakMap<DescField, DescMessage>();

function mapEntryOf(field: DescField & { fieldKind: "map" }): DescMessage {
  let entry = entries.get(field);
  if (!entry) {
    const value = field.mapKind === "message" ? [{ number: 2, fieldKind: "message", message: field.message }] : [];
    entry = { fields: value } as unknown as DescMessage;
    entries.set(field, entry);
  }
  return entry;
}
