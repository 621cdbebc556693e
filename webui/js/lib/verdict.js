// Pure reading of a result document against what it competed with: per workload, this run's
// value beside the incumbent's (measured side by side by the judge) or else the board's best.

/** The speed-up of `value` over `other` in the metric's direction (>1: `value` is better). */
export function speedupOver(value, other, better = 'lower') {
  if (!Number.isFinite(value) || !Number.isFinite(other) || value <= 0 || other <= 0) return null;
  return better === 'higher' ? value / other : other / value;
}

function byName(workloads) {
  return new Map((workloads ?? []).filter((w) => w && w.name).map((w) => [w.name, w]));
}

function finite(x) {
  return Number.isFinite(x) ? x : null;
}

function pair(x) {
  return Array.isArray(x) && x.length === 2 ? x : null;
}

/** The document's `score` against the board's reference ({speedup, interval, blocks}), or null. */
export function scoreOfDocument(doc) {
  const s = doc?.score;
  if (s?.against !== 'reference' || !Number.isFinite(s.speedup)) return null;
  return { speedup: s.speedup, interval: pair(s.interval), blocks: s.blocks ?? null };
}

/**
 * The per-workload comparison of a result document, or null when it has nothing to compare.
 * Where the judge measured rivals side by side, those figures are used as they are: the
 * incumbent (`workloads[].incumbent`, `speedup`, the overall `comparison`) and the board's
 * pinned reference (`workloads[].reference`, `reference_speedup`, the overall `score`); a new
 * kernel has the reference alone. Otherwise the run's workload values are set against `best`
 * (the scoreboard's best: `{workloads: [{name, value}]}`).
 * Returns {against: 'incumbent' | 'reference' | 'best', withReference, outcome, reason, speedup,
 * interval, score, rows: [{name, value, other, speedup, interval, reference, referenceSpeedup,
 * referenceInterval}]}.
 */
export function comparisonOf(doc, best = null) {
  const workloads = (doc?.workloads ?? []).filter((w) => w && w.name);
  const summary = doc?.comparison ?? null;
  const withIncumbent = workloads.some((w) => w.incumbent);
  const withReference = workloads.some((w) => w.reference);
  if (withIncumbent || withReference) {
    return {
      against: withIncumbent ? 'incumbent' : 'reference',
      withReference,
      outcome: summary?.outcome ?? null,
      reason: summary?.reason ?? null,
      speedup: withIncumbent ? finite(summary?.speedup) : null,
      interval: withIncumbent ? pair(summary?.interval) : null,
      score: scoreOfDocument(doc),
      rows: workloads.map((w) => ({
        name: w.name,
        value: w.value ?? null,
        other: w.incumbent?.median ?? null,
        speedup: finite(w.speedup?.value),
        interval: pair(w.speedup?.interval),
        reference: w.reference?.median ?? null,
        referenceSpeedup: finite(w.reference_speedup?.value),
        referenceInterval: pair(w.reference_speedup?.interval),
      })),
    };
  }
  const theirs = byName(best?.workloads);
  if (workloads.length === 0 || theirs.size === 0) return null;
  const better = doc?.metric?.better ?? best?.metric?.better ?? 'lower';
  return {
    against: 'best',
    withReference: false,
    outcome: null,
    reason: summary?.reason ?? null,
    speedup: speedupOver(doc?.metric?.value, best?.value, better),
    interval: null,
    score: scoreOfDocument(doc),
    rows: workloads.map((w) => {
      const other = theirs.get(w.name)?.value ?? null;
      return { name: w.name, value: w.value ?? null, other, speedup: speedupOver(w.value, other, better), interval: null, reference: null, referenceSpeedup: null, referenceInterval: null };
    }),
  };
}
