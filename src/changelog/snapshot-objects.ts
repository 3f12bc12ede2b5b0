/**
 * Reading and removing snapshot objects as the object store lays them out (NATS ADR-20,
 * what @nats-io/obj writes): an object's chunks are the messages of
 * `$O.<bucket>.C.<nuid>`, its metadata the one message of
 * `$O.<bucket>.M.<base64url(name)>` (JSON: nuid, size, chunks, a SHA-256 digest),
 * published after every chunk is stored.
 *
 * Every read here is a STREAM.MSG.GET or STREAM.INFO, answered by the stream leader, not
 * the client's get() and list(): those ride an ordered push consumer, and on nats-server
 * 2.9.10 its creation (through the meta leader) kept timing out for 5-36 s after a kill
 * of the bucket's leader in the contract test, long after gets answered again (the
 * changelog met the same, see jetstream-change-log.ts). Objects are written by the
 * client; removing one is two purges (see remove).
 */
import { createHash } from "node:crypto";
import type { JetStreamManager } from "@nats-io/jetstream";
import { Base64UrlPaddedCodec, type ObjectInfo } from "@nats-io/obj";

/** A snapshot object's name: partition and sequence, so that a listing of names says which is whose. */
export const snapshotName = (partition: number, seq: number) => `p${partition}-s${seq}`;
const NAME = /^p(\d+)-s(\d+)$/;

/** A snapshot object as its name says, before its metadata is read. */
export interface ListedSnapshot {
  name: string;
  seq: number;
}

/** Why a snapshot's bytes could not be read. */
export type ReadMiss =
  /** Its metadata is gone or names other chunks: a newer put removed or replaced it meanwhile. */
  | "removed"
  /** Its metadata names chunks that are not all stored: a put whose metadata landed after its chunks were purged. It never becomes whole. */
  | "incomplete";

export class SnapshotObjects {
  constructor(
    private readonly jsm: JetStreamManager,
    readonly bucket: string,
  ) {}

  get stream(): string {
    return `OBJ_${this.bucket}`;
  }

  /** The partition's snapshot objects with a metadata message, newest first: one STREAM.INFO listing the metadata subjects. */
  async list(partition: number): Promise<ListedSnapshot[]> {
    const filter = `$O.${this.bucket}.M.>`;
    const info = await this.jsm.streams.info(this.stream, { subjects_filter: filter });
    const out: ListedSnapshot[] = [];
    for (const subject of Object.keys(info.state.subjects ?? {})) {
      const name = Base64UrlPaddedCodec.decode(subject.slice(filter.length - 1)) as string;
      const match = NAME.exec(name);
      if (match && Number(match[1]) === partition) out.push({ name, seq: Number(match[2]) });
    }
    return out.sort((a, b) => b.seq - a.seq);
  }

  /** The object's metadata, or undefined if it has none (or a deletion mark). */
  async info(name: string): Promise<ObjectInfo | undefined> {
    const m = await this.jsm.streams.getMessage(this.stream, { last_by_subj: this.metaSubject(name) });
    const info = m?.json<ObjectInfo>();
    return info && !info.deleted ? info : undefined;
  }

  /** The listed object's bytes (see read), or why they could not be read. */
  async fetch(listed: ListedSnapshot): Promise<Uint8Array | ReadMiss> {
    const info = await this.info(listed.name);
    return info ? this.read(info) : "removed";
  }

  /** Whether all the chunks the metadata names are stored. */
  async complete(info: ObjectInfo): Promise<boolean> {
    const subject = this.chunkSubject(info.nuid);
    const si = await this.jsm.streams.info(this.stream, { subjects_filter: subject });
    return (si.state.subjects?.[subject] ?? 0) === info.chunks;
  }

  /** The object's bytes, chunk by chunk, checked against its size and digest; or why they could not be read. */
  async read(info: ObjectInfo): Promise<Uint8Array | ReadMiss> {
    const out = new Uint8Array(info.size);
    const hash = createHash("sha256");
    const subject = this.chunkSubject(info.nuid);
    // The chunks come in stream order from the stream's first message on; each next one
    // is looked up from the one before.
    let from = (await this.jsm.streams.info(this.stream)).state.first_seq;
    let at = 0;
    for (let i = 0; i < info.chunks; i++) {
      // next_by_subj is in nats-server's STREAM.MSG.GET since 2.9, though not in the client's MsgRequest type.
      const m = await this.jsm.streams.getMessage(this.stream, { seq: from, next_by_subj: subject } as unknown as { seq: number });
      if (!m) return (await this.info(info.name))?.nuid === info.nuid ? "incomplete" : "removed";
      const data = m.data;
      if (at + data.byteLength > out.byteLength) throw new Error(`${info.name} holds more than its ${out.byteLength} bytes`);
      out.set(data, at);
      hash.update(data);
      at += data.byteLength;
      from = m.seq + 1;
    }
    if (at !== out.byteLength) throw new Error(`${info.name}: its ${info.chunks} chunks hold ${at} of its ${out.byteLength} bytes`);
    // "SHA-256=" then base64url; Node's base64 decoder takes either alphabet, padded or not.
    const expected = info.digest.startsWith("SHA-256=") ? Buffer.from(info.digest.slice(8), "base64") : undefined;
    if (!expected?.equals(hash.digest())) throw new Error(`${info.name} is corrupt: its bytes do not match its digest ${info.digest}`);
    return out;
  }

  /**
   * Removes the object: its chunks first, then its metadata, so that a removal cut short
   * leaves an incomplete object that the next listing finds again, never chunks that
   * nothing names. Not the client's delete(), which leaves a deletion mark per object
   * that every later listing would read.
   */
  async remove(listed: ListedSnapshot): Promise<void> {
    const info = await this.info(listed.name);
    if (info) await this.jsm.streams.purge(this.stream, { filter: this.chunkSubject(info.nuid) });
    await this.jsm.streams.purge(this.stream, { filter: this.metaSubject(listed.name) });
  }

  private chunkSubject(nuid: string): string {
    return `$O.${this.bucket}.C.${nuid}`;
  }

  private metaSubject(name: string): string {
    return `$O.${this.bucket}.M.${Base64UrlPaddedCodec.encode(name)}`;
  }
}
