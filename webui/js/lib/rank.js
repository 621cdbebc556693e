// The metric's direction: which of two values is better. Boards are ranked by index.json, not
// here; the history chart uses this for its best-so-far frontier.

/** -1 when a is better than b, 1 when worse, 0 when equal, in the metric's direction. */
export function compareValues(a, b, better = 'lower') {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  const sign = better === 'higher' ? -1 : 1;
  return a < b ? -sign : sign;
}
