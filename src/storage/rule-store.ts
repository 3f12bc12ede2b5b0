/** Durable task-type concurrency rules (the RuleStore port of the rule registry). */
import type { RuleStore, TypeRules } from "../grains/queue/rules.js";
import type { Database } from "./database.js";

export class SqliteRuleStore implements RuleStore {
  private readonly stmt;

  constructor(private readonly db: Database) {
    const s = db.sqlite;
    this.stmt = {
      all: s.prepare("SELECT type, rules, updated_at FROM task_type_rules ORDER BY type"),
      save: s.prepare(`INSERT INTO task_type_rules (type, rules, updated_at) VALUES (@type, @rules, @updatedAt)
        ON CONFLICT (type) DO UPDATE SET rules = @rules, updated_at = @updatedAt`),
      delete: s.prepare("DELETE FROM task_type_rules WHERE type = ?"),
    };
  }

  loadAll(): TypeRules[] {
    return (this.stmt.all.all() as Array<{ type: string; rules: string; updated_at: number }>).map((r) => {
      const stored = JSON.parse(r.rules) as { source: TypeRules["source"]; rules: TypeRules["rules"] };
      return { type: r.type, rules: stored.rules, source: stored.source, updatedAtMs: r.updated_at };
    });
  }

  save(t: TypeRules): void {
    this.db.write(() => this.stmt.save.run({ type: t.type, rules: JSON.stringify({ source: t.source, rules: t.rules }), updatedAt: t.updatedAtMs }));
  }

  delete(type: string): boolean {
    return this.db.write(() => this.stmt.delete.run(type).changes > 0);
  }
}
