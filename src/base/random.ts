/** Randomness, injected, so that jitter and weighted choices replay under a seed in tests. */
export interface Random {
  /** A float in [0, 1). */
  next(): number;
}

export const systemRandom: Random = { next: () => Math.random() };

/** A small deterministic generator (mulberry32) for tests and simulations. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return {
    next() {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    },
  };
}
