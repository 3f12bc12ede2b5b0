/**
 * The concurrency rules of task types: validated and compiled once, stored durably,
 * and evaluated at enqueue into the (rule, key, limit, strategy) list the grain counts.
 *
 * Keys and dynamic limits are CEL expressions over `input` (the JSON payload) and
 * `additional_metadata` (the metadata map). Compiled programs are cached by source text.
 * An expression that fails at enqueue fails the task with the evaluation error; it is
 * never silently keyless.
 *
 * The work is bounded (cel-meter.ts, src/base/limits.ts): expressions are short, rules read
 * payloads of at most RULE_INPUT_MAX_BYTES nesting at most RULE_INPUT_MAX_DEPTH deep,
 * and one task's evaluation may spend RULE_EVAL_COST_MAX units. A task beyond a bound
 * is refused at enqueue (INVALID_ARGUMENT naming its payload): it changes nothing.
 */
import { celError, isCelError, type CelResult } from "@bufbuild/cel";
import { ConveyorError, invalidField } from "../../base/errors.js";
import {
  KEY_MAX_CHARS, REGISTER_RULES_MAX, RULE_EVAL_COST_MAX, RULE_EXPRESSION_MAX_CHARS, RULE_INPUT_MAX_BYTES, RULE_INPUT_MAX_DEPTH,
  RULE_KEY_MAX_CHARS, RULE_NAME_MAX_CHARS, RULES_PER_TYPE_MAX, quote,
} from "../../base/limits.js";
import { checkLength } from "../validate.js";
import { STRATEGIES, type RuleDef, type RuleSource, type RuleStore, type TaskRule, type TypeRules } from "../../grains/queue/rules.js";
import { WorkSlicer } from "../work-slicer.js";
import { compileMetered, jsonDepth, withBudget, type MeteredProgram } from "./cel-meter.js";

type Program = MeteredProgram;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;
/** Compiled programs kept beyond those of the current rules (a cache, pruned past this). */
const SPARE_PROGRAMS_MAX = 1024;

/** A change of the rule set: types stored (replacing theirs) and types removed. */
export interface RulesPlan {
  puts: TypeRules[];
  deletes: string[];
}

export class RuleRegistry {
  private readonly types = new Map<string, TypeRules>();
  /** Compiled programs (or why the source does not compile) by source text. */
  private readonly programs = new Map<string, Program | Error>();

  constructor(private readonly store: RuleStore, private readonly nowMs: () => number) {}

  /** Loads the stored rules (at node start). */
  load(): void {
    for (const t of this.store.loadAll()) this.cache(t);
  }

  /** Puts one type's rules in memory, compiling its expressions. */
  private cache(t: TypeRules): void {
    // A stored rule that no longer compiles (stored before a bound existed) fails its
    // tasks with the reason, as any evaluation error does; the node still starts.
    for (const r of t.rules) {
      this.compile(r.expression);
      if (r.maxRunsExpression) this.compile(r.maxRunsExpression);
    }
    this.types.set(t.type, t);
  }

  /**
   * Applies rules decided elsewhere (a cluster's rule set, validated by the node that
   * wrote it): held in memory and mirrored into this node's store, without validation.
   */
  apply(plan: RulesPlan): void {
    // Memory first: it is what enqueue reads, and it must follow the cluster even when
    // the mirror cannot be written (the error is thrown after, for the caller to log).
    for (const t of plan.puts) this.cache(t);
    for (const type of plan.deletes) this.types.delete(type);
    for (const t of plan.puts) this.store.save(t);
    for (const type of plan.deletes) this.store.delete(type);
  }

  /** Makes the whole set `entries` (a cluster member's read of the cluster's rules): types not in it are removed, unchanged ones not rewritten. */
  replaceAll(entries: readonly TypeRules[]): void {
    const keep = new Set(entries.map((t) => t.type));
    const changed = entries.filter((t) => JSON.stringify(this.types.get(t.type)) !== JSON.stringify(t));
    this.apply({ puts: changed, deletes: [...this.types.keys()].filter((type) => !keep.has(type)) });
  }

  /**
   * Compiles the expressions of rules about to be registered, yielding to the event
   * loop between slices of work (compiling one takes up to a few milliseconds), so that
   * registering many rules never stalls other callers. Validation then finds them
   * compiled. Sources that do not compile are remembered with their error.
   */
  async prepare(rules: readonly RuleDef[]): Promise<void> {
    if (rules.length > REGISTER_RULES_MAX) return; // refused by the caller's validation; compile nothing
    const slicer = new WorkSlicer();
    for (const r of rules) {
      for (const source of [r.expression, r.maxRunsExpression]) {
        if (source === "" || source.length > RULE_EXPRESSION_MAX_CHARS || this.programs.has(source)) continue;
        this.compile(source);
        if (slicer.due()) await slicer.yield();
      }
    }
  }

  list(): TypeRules[] {
    return [...this.types.values()].sort((a, b) => a.type.localeCompare(b.type));
  }

  get(type: string): TypeRules | undefined {
    return this.types.get(type);
  }

  /** Validates and stores a type's rules, replacing the previous ones. */
  set(type: string, rules: RuleDef[], source: RuleSource, field = "rules"): TypeRules {
    return this.save(this.planSet(type, rules, source, field));
  }

  /** What `set` would store, validated against the current rules; stores nothing. */
  planSet(type: string, rules: RuleDef[], source: RuleSource, field = "rules"): TypeRules {
    this.validate(type, rules, field, this.types);
    return { type, rules, source, updatedAtMs: this.nowMs() };
  }

  private save(entry: TypeRules): TypeRules {
    this.store.save(entry);
    this.types.set(entry.type, entry);
    return entry;
  }

  /**
   * A worker declares the rules of the types it handles, all or nothing: every type is
   * validated before any is stored. Declaring none clears rules that came from workers,
   * but leaves rules an operator set.
   */
  registerAll(types: ReadonlyArray<{ type: string; rules: RuleDef[]; field: string }>): void {
    const plan = this.planRegisterAll(types);
    for (const t of plan.puts) this.save(t);
    for (const type of plan.deletes) this.delete(type);
  }

  /** What `registerAll` would store and remove, validated against the current rules; changes nothing. */
  planRegisterAll(types: ReadonlyArray<{ type: string; rules: RuleDef[]; field: string }>): RulesPlan {
    // Every type is checked against the state the whole call leads to (stored types it
    // does not replace, and the other types of the call), then all are applied.
    const updatedAtMs = this.nowMs();
    const after = new Map(this.types);
    for (const t of types) {
      if (t.rules.length > 0) after.set(t.type, { type: t.type, rules: t.rules, source: "worker", updatedAtMs });
      else if (after.get(t.type)?.source === "worker") after.delete(t.type);
    }
    for (const t of types) if (t.rules.length > 0) this.validate(t.type, t.rules, t.field, after);
    // The types in call order, as if applied one after the other (a type named twice ends as its last mention says).
    const current = new Map(this.types);
    const puts = new Map<string, TypeRules>();
    const deletes = new Set<string>();
    for (const t of types) {
      if (t.rules.length > 0) {
        const entry: TypeRules = { type: t.type, rules: t.rules, source: "worker", updatedAtMs };
        current.set(t.type, entry);
        puts.set(t.type, entry);
        deletes.delete(t.type);
      } else if (current.get(t.type)?.source === "worker") {
        current.delete(t.type);
        puts.delete(t.type);
        if (this.types.has(t.type)) deletes.add(t.type);
      }
    }
    return { puts: [...puts.values()], deletes: [...deletes] };
  }

  delete(type: string): boolean {
    this.types.delete(type);
    return this.store.delete(type);
  }

  /**
   * The rules of `type` evaluated for one task, or the error that fails it (the task is
   * then stored archived). Throws INVALID_ARGUMENT naming `${field}.payload` when the
   * task is beyond a bound on the work its rules may do: it is refused, nothing stored.
   */
  evaluate(type: string, payload: Uint8Array, metadata: Record<string, string>, field = "task"): { rules: TaskRule[]; error: string } {
    const entry = this.types.get(type);
    if (!entry || entry.rules.length === 0) return { rules: [], error: "" };
    const payloadField = `${field}.payload`;
    if (payload.byteLength > RULE_INPUT_MAX_BYTES) {
      throw invalidField(payloadField, `is ${payload.byteLength} bytes; tasks of type ${JSON.stringify(type)} have concurrency rules, which read at most ${RULE_INPUT_MAX_BYTES} bytes of payload`);
    }
    const depth = jsonDepth(payload);
    if (depth > RULE_INPUT_MAX_DEPTH) {
      throw invalidField(payloadField, `nests ${depth} levels deep; the concurrency rules of type ${JSON.stringify(type)} read JSON nested at most ${RULE_INPUT_MAX_DEPTH} levels deep`);
    }
    let input: unknown;
    try {
      input = payload.byteLength === 0 ? {} : JSON.parse(new TextDecoder().decode(payload));
    } catch {
      return { rules: [], error: `concurrency rules of type ${quote(type)} need a JSON payload: it does not parse as JSON` };
    }
    const run = withBudget(RULE_EVAL_COST_MAX, () => this.evaluateRules(type, entry, { input, additional_metadata: metadata }, payloadField));
    if (run.exceeded) {
      throw invalidField(payloadField, `evaluating the concurrency rules of type ${JSON.stringify(type)} over this payload costs more than ${RULE_EVAL_COST_MAX} units, the limit per task; send a smaller payload (or simplify the rules)`);
    }
    if (run.value instanceof ConveyorError) throw run.value;
    return run.value;
  }

  private evaluateRules(type: string, entry: TypeRules, ctx: Parameters<Program>[0], payloadField: string): { rules: TaskRule[]; error: string } | ConveyorError {
    const rules: TaskRule[] = [];
    for (const [i, r] of entry.rules.entries()) {
      const where = `concurrency rule ${i}${r.name ? ` (${r.name})` : ""} of type ${quote(type)}`;
      const key = this.run(r.expression, ctx);
      if (isCelError(key)) return { rules: [], error: `${where}: key expression ${quote(r.expression)} failed: ${key.message}` };
      if (typeof key !== "string" && typeof key !== "number" && typeof key !== "bigint") {
        return { rules: [], error: `${where}: key expression ${quote(r.expression)} must give a string or a number` };
      }
      const keyText = String(key);
      if (keyText.length > RULE_KEY_MAX_CHARS) {
        return invalidField(payloadField, `${where}: its key expression gives a key of ${keyText.length} characters over this payload; keys are at most ${RULE_KEY_MAX_CHARS}`);
      }
      let maxRuns = r.maxRuns;
      if (r.maxRunsExpression) {
        const v = this.run(r.maxRunsExpression, ctx);
        if (isCelError(v)) return { rules: [], error: `${where}: max runs expression ${quote(r.maxRunsExpression)} failed: ${v.message}` };
        const n = typeof v === "bigint" ? Number(v) : typeof v === "number" ? v : NaN;
        if (!Number.isInteger(n) || n < 1) {
          return { rules: [], error: `${where}: max runs expression ${quote(r.maxRunsExpression)} must give a whole number of at least 1, got ${String(v)}` };
        }
        maxRuns = n;
      }
      rules.push({ ruleId: r.name ? `@${r.name}` : `${type}#${i}`, key: keyText, maxRuns, strategy: r.strategy });
    }
    return { rules, error: "" };
  }

  private run(source: string, ctx: Parameters<Program>[0]): CelResult {
    const program = this.compile(source);
    return program instanceof Error ? celError(`does not compile: ${program.message}`) : program(ctx);
  }

  private validate(type: string, rules: RuleDef[], field: string, types: ReadonlyMap<string, TypeRules>): void {
    if (type === "" || type.length > KEY_MAX_CHARS) throw invalidField("type", `must be 1..${KEY_MAX_CHARS} characters`);
    if (rules.length > RULES_PER_TYPE_MAX) throw invalidField(field, `at most ${RULES_PER_TYPE_MAX} rules per task type`);
    const names = new Set<string>();
    rules.forEach((r, i) => {
      const f = `${field}[${i}]`;
      checkLength(r.name, `${f}.name`, RULE_NAME_MAX_CHARS);
      checkLength(r.expression, `${f}.expression`, RULE_EXPRESSION_MAX_CHARS);
      checkLength(r.maxRunsExpression, `${f}.max_runs_expression`, RULE_EXPRESSION_MAX_CHARS);
      if (r.name !== "" && !NAME.test(r.name)) throw invalidField(`${f}.name`, `use 1-${RULE_NAME_MAX_CHARS} letters, digits, '.', '_', ':' or '-'`);
      if (r.name !== "" && names.has(r.name)) throw invalidField(`${f}.name`, `rule ${quote(r.name)} appears twice`);
      if (r.name !== "") names.add(r.name);
      if (!STRATEGIES.includes(r.strategy)) throw invalidField(`${f}.strategy`, `must be one of ${STRATEGIES.join(", ")}`);
      if (r.expression.trim() === "") throw invalidField(`${f}.expression`, "must not be empty");
      this.compileOrThrow(r.expression, `${f}.expression`);
      if (r.maxRunsExpression) this.compileOrThrow(r.maxRunsExpression, `${f}.max_runs_expression`);
      else if (!Number.isInteger(r.maxRuns) || r.maxRuns < 1) throw invalidField(`${f}.max_runs`, `must be at least 1 (or give max_runs_expression), got ${r.maxRuns}`);
    });
    this.checkSharedOrder(type, rules.map((r) => r.name).filter((n) => n !== ""), field, types);
  }

  /**
   * Every type must chain the shared rules it has in common with another type in the
   * same relative order (inconsistent orders can deadlock runs holding one shared slot
   * while they wait for another).
   */
  private checkSharedOrder(type: string, order: string[], field: string, types: ReadonlyMap<string, TypeRules>): void {
    for (const other of types.values()) {
      if (other.type === type) continue;
      const theirs = other.rules.map((r) => r.name).filter((n) => n !== "");
      const common = order.filter((n) => theirs.includes(n));
      const theirCommon = theirs.filter((n) => common.includes(n));
      if (common.join("\u0000") !== theirCommon.join("\u0000")) {
        throw new ConveyorError("INVALID_ARGUMENT", "INVALID_FIELD",
          `${field}: type ${quote(type)} orders the shared rules [${common.join(", ")}] but type ${quote(other.type)} orders them [${theirCommon.join(", ")}]; chain shared rules in one order everywhere`,
          field);
      }
    }
  }

  private compileOrThrow(source: string, field: string): void {
    if (source.length > RULE_EXPRESSION_MAX_CHARS) {
      throw invalidField(field, `is ${source.length} characters; at most ${RULE_EXPRESSION_MAX_CHARS}`);
    }
    const program = this.compile(source);
    if (program instanceof Error) throw invalidField(field, `does not compile: ${program.message}`);
  }

  /** The program of `source`, compiled once (a source that does not compile gives its error). */
  private compile(source: string): Program | Error {
    let program = this.programs.get(source);
    if (!program) {
      if (this.programs.size >= this.inUse().size + SPARE_PROGRAMS_MAX) this.prune();
      try {
        program = compileMetered(source);
      } catch (e) {
        program = e instanceof Error ? e : new Error(String(e));
      }
      this.programs.set(source, program);
    }
    return program;
  }

  /** Sources of the current rules. */
  private inUse(): Set<string> {
    const sources = new Set<string>();
    for (const t of this.types.values()) {
      for (const r of t.rules) {
        sources.add(r.expression);
        if (r.maxRunsExpression) sources.add(r.maxRunsExpression);
      }
    }
    return sources;
  }

  /** Forgets compiled programs no current rule uses (the cache stays bounded). */
  private prune(): void {
    const keep = this.inUse();
    for (const source of this.programs.keys()) if (!keep.has(source)) this.programs.delete(source);
  }
}
