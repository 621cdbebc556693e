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

/**
 * The per-workload comparison of a result document, or null when it has nothing to compare.
 * Where the judge measured the incumbent side by side (`workloads[].incumbent`, `speedup`,
 * `comparison`), those figures are used as they are; otherwise the run's workload values are
 * set against `best` (the scoreboard's best: `{workloads: [{name, value}]}`).
 * Returns {against: 'incumbent' | 'best', outcome, reason, speedup, interval, rows:
 * [{name, value, other, speedup, interval}]}.
 */
export function comparisonOf(doc, best = null) {
  const workloads = (doc?.workloads ?? []).filter((w) => w && w.name);
  const summary = doc?.comparison ?? null;
  if (workloads.some((w) => w.incumbent)) {
    return {
      against: 'incumbent',
      outcome: summary?.outcome ?? null,
      reason: summary?.reason ?? null,
      speedup: Number.isFinite(summary?.speedup) ? summary.speedup : null,
      interval: Array.isArray(summary?.interval) ? summary.interval : null,
      rows: workloads.map((w) => ({
        name: w.name,
        value: w.value ?? null,
        other: w.incumbent?.median ?? null,
        speedup: Number.isFinite(w.speedup?.value) ? w.speedup.value : null,
        interval: Array.isArray(w.speedup?.interval) ? w.speedup.interval : null,
      })),
    };
  }
  const theirs = byName(best?.workloads);
  if (workloads.length === 0 || theirs.size === 0) return null;
  const better = doc?.metric?.better ?? best?.metric?.better ?? 'lower';
  return {
    against: 'best',
    outcome: null,
    reason: summary?.reason ?? null,
    speedup: speedupOver(doc?.metric?.value, best?.value, better),
    interval: null,
    rows: workloads.map((w) => {
      const other = theirs.get(w.name)?.value ?? null;
      return { name: w.name, value: w.value ?? null, other, speedup: speedupOver(w.value, other, better), interval: null };
    }),
  };
}
