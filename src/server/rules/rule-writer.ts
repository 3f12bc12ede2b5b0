/**
 * How the services change task types' rules. A single node writes its RuleRegistry
 * (SQLite, as always); a cluster member writes the cluster's rule set in etcd
 * (cluster-rules.ts), which every member's registry follows. Validation is the
 * registry's either way, so the errors are the same.
 */
import type { RuleDef, RuleSource, TypeRules } from "../../grains/queue/rules.js";
import type { RuleRegistry } from "./rule-registry.js";

export interface RuleWriter {
  /** Validates and stores a type's rules, replacing the previous ones; answers what is stored. */
  set(type: string, rules: RuleDef[], source: RuleSource): Promise<TypeRules>;
  /** A worker's declaration (RuleRegistry.registerAll's semantics): all or nothing. */
  registerAll(types: ReadonlyArray<{ type: string; rules: RuleDef[]; field: string }>): Promise<void>;
  /** Removes a type's rules; false when it had none. */
  delete(type: string): Promise<boolean>;
}

/** A single node's writer: the registry itself. */
export function localRuleWriter(registry: RuleRegistry): RuleWriter {
  return {
    set: async (type, rules, source) => registry.set(type, rules, source),
    registerAll: async (types) => registry.registerAll(types),
    delete: async (type) => registry.delete(type),
  };
}
