/**
 * The concurrency rules of task types: validated and compiled once, stored durably,
 * and evaluated at enqueue into the (rule, key, limit, strategy) list the grain counts.
 *
 * Keys and dynamic limits are CEL expressions over `input` (the JSON payload) and
 * `additional_metadata` (the metadata map). Compiled programs are cached by source text.
 * An expression that fails at enqueue fails the task with the evaluation error; it is
 * never silently keyless.
 */
import { celEnv, isCelError, parse, plan, type CelResult } from "@bufbuild/cel";
import { ConveyorError, invalidField } from "../../base/errors.js";
import { KEY_MAX_CHARS, RULE_EXPRESSION_MAX_CHARS, RULE_NAME_MAX_CHARS, RULES_PER_TYPE_MAX, quote } from "../../base/limits.js";
import { checkLength } from "../validate.js";
import { STRATEGIES, type RuleDef, type RuleSource, type RuleStore, type TaskRule, type TypeRules } from "../../grains/queue/rules.js";

type Program = (ctx: { input: unknown; additional_metadata: Record<string, string> }) => CelResult;

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:-]*$/;

export class RuleRegistry {
  private readonly types = new Map<string, TypeRules>();
  private readonly programs = new Map<string, Program>();
  private readonly env = celEnv();

  constructor(private readonly store: RuleStore, private readonly nowMs: () => number) {}

  /** Loads the stored rules (at node start). */
  load(): void {
    for (const t of this.store.loadAll()) {
      for (const r of t.rules) {
        this.compile(r.expression);
        if (r.maxRunsExpression) this.compile(r.maxRunsExpression);
      }
      this.types.set(t.type, t);
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
    this.validate(type, rules, field, this.types);
    return this.save({ type, rules, source, updatedAtMs: this.nowMs() });
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
    // Every type is checked against the state the whole call leads to (stored types it
    // does not replace, and the other types of the call), then all are applied.
    const updatedAtMs = this.nowMs();
    const after = new Map(this.types);
    for (const t of types) {
      if (t.rules.length > 0) after.set(t.type, { type: t.type, rules: t.rules, source: "worker", updatedAtMs });
      else if (after.get(t.type)?.source === "worker") after.delete(t.type);
    }
    for (const t of types) if (t.rules.length > 0) this.validate(t.type, t.rules, t.field, after);
    for (const t of types) {
      if (t.rules.length > 0) this.save(after.get(t.type)!);
      else if (this.types.get(t.type)?.source === "worker") this.delete(t.type);
    }
  }

  delete(type: string): boolean {
    this.types.delete(type);
    return this.store.delete(type);
  }

  /** The rules of `type` evaluated for one task, or the error that fails it. */
  evaluate(type: string, payload: Uint8Array, metadata: Record<string, string>): { rules: TaskRule[]; error: string } {
    const entry = this.types.get(type);
    if (!entry || entry.rules.length === 0) return { rules: [], error: "" };
    let input: unknown;
    try {
      input = payload.byteLength === 0 ? {} : JSON.parse(new TextDecoder().decode(payload));
    } catch {
      return { rules: [], error: `concurrency rules of type ${quote(type)} need a JSON payload: it does not parse as JSON` };
    }
    const ctx = { input: input as never, additional_metadata: metadata };
    const rules: TaskRule[] = [];
    for (const [i, r] of entry.rules.entries()) {
      const where = `concurrency rule ${i}${r.name ? ` (${r.name})` : ""} of type ${quote(type)}`;
      const key = this.programs.get(r.expression)!(ctx);
      if (isCelError(key)) return { rules: [], error: `${where}: key expression ${quote(r.expression)} failed: ${key.message}` };
      if (typeof key !== "string" && typeof key !== "number" && typeof key !== "bigint") {
        return { rules: [], error: `${where}: key expression ${quote(r.expression)} must give a string or a number` };
      }
      let maxRuns = r.maxRuns;
      if (r.maxRunsExpression) {
        const v = this.programs.get(r.maxRunsExpression)!(ctx);
        if (isCelError(v)) return { rules: [], error: `${where}: max runs expression ${quote(r.maxRunsExpression)} failed: ${v.message}` };
        const n = typeof v === "bigint" ? Number(v) : typeof v === "number" ? v : NaN;
        if (!Number.isInteger(n) || n < 1) {
          return { rules: [], error: `${where}: max runs expression ${quote(r.maxRunsExpression)} must give a whole number of at least 1, got ${String(v)}` };
        }
        maxRuns = n;
      }
      rules.push({ ruleId: r.name ? `@${r.name}` : `${type}#${i}`, key: String(key), maxRuns, strategy: r.strategy });
    }
    return { rules, error: "" };
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
    try {
      this.compile(source);
    } catch (e) {
      throw invalidField(field, `does not compile: ${(e as Error).message}`);
    }
  }

  private compile(source: string): Program {
    let program = this.programs.get(source);
    if (!program) {
      program = plan(this.env, parse(source)) as unknown as Program;
      this.programs.set(source, program);
    }
    return program;
  }
}
