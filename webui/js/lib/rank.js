// Pure ranking: order by a metric's direction, detect ties by overlapping spreads, speed-ups.

/** -1 when a is better than b, 1 when worse, 0 when equal, in the metric's direction. */
export function compareValues(a, b, better = 'lower') {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  const sign = better === 'higher' ? -1 : 1;
  return a < b ? -sign : sign;
}

/** True when a's value is strictly better than b's in the direction. */
export function isBetter(a, b, better = 'lower') {
  return compareValues(a, b, better) < 0;
}

/** The [low, high] interval of an entry's spread, or the point value when it has none. */
export function spreadInterval(entry) {
  const { value, p10, p90 } = entry;
  if (!Number.isFinite(value)) return null;
  const lo = Number.isFinite(p10) ? p10 : value;
  const hi = Number.isFinite(p90) ? p90 : value;
  return [Math.min(lo, hi, value), Math.max(lo, hi, value)];
}

/** True when the p10-p90 spreads of two entries overlap (a tie in measurement terms). */
export function spreadsOverlap(a, b) {
  const ia = spreadInterval(a);
  const ib = spreadInterval(b);
  if (!ia || !ib) return false;
  return ia[0] <= ib[1] && ib[0] <= ia[1];
}

function entryOrder(better) {
  return (a, b) => {
    if (Boolean(a.disqualified) !== Boolean(b.disqualified)) return a.disqualified ? 1 : -1;
    const byValue = compareValues(a.value, b.value, better);
    if (byValue !== 0) return byValue;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  };
}

/**
 * Rank entries ({id, value, p10, p90, disqualified}) in the metric's direction; sets
 * rank, tie and tieWith on the entries themselves and returns them in rank order.
 * Disqualified entries and entries without a value come last with rank null.
 * Equal values share a rank (1, 2, 2, 4). An entry is tied when its spread overlaps the
 * spread of the entry ranked directly above or below it; `tieWith` names those neighbours.
 */
export function rankEntries(entries, better = 'lower') {
  const ranked = [...entries].sort(entryOrder(better));
  for (const e of ranked) {
    e.rank = null;
    e.tie = false;
    e.tieWith = [];
  }
  let previous = null;
  ranked.forEach((entry, i) => {
    if (entry.disqualified || !Number.isFinite(entry.value)) return;
    entry.rank = previous && previous.value === entry.value ? previous.rank : i + 1;
    if (previous && spreadsOverlap(previous, entry)) {
      entry.tie = true;
      previous.tie = true;
      entry.tieWith.push(previous.id);
      previous.tieWith.push(entry.id);
    }
    previous = entry;
  });
  return ranked;
}

/** How many times better `value` is than `reference`, in the direction (>1 is faster). */
export function speedup(value, reference, better = 'lower') {
  if (!Number.isFinite(value) || !Number.isFinite(reference) || value <= 0 || reference <= 0) {
    return null;
  }
  return better === 'higher' ? value / reference : reference / value;
}

const REFERENCE_NAMES = /(^|_)(ref|reference|baseline|naive)$/i;

/**
 * Pick a group's reference entry: the id the index names, else an entry flagged as
 * reference (or tagged so), else one whose name ends in _ref/_reference/_baseline/_naive.
 */
export function findReference(entries, namedId = null) {
  if (namedId) {
    const named = entries.find((e) => e.id === namedId);
    if (named) return named;
  }
  const flagged = entries.find((e) => e.reference === true || (e.tags ?? []).includes('reference'));
  if (flagged) return flagged;
  return entries.find((e) => REFERENCE_NAMES.test(e.name ?? '')) ?? null;
}
