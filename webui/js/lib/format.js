// Pure formatting of numbers, units, spreads and times. No DOM, no clock: "now" is a parameter.

const TIME_UNITS = [
  ['ns', 1e-9],
  ['us', 1e-6],
  ['ms', 1e-3],
  ['s', 1],
];
const TIME_ALIASES = { 'µs': 'us', 'μs': 'us', usec: 'us', msec: 'ms', sec: 's', nsec: 'ns' };
const SI_PREFIXES = [
  ['', 1],
  ['k', 1e3],
  ['M', 1e6],
  ['G', 1e9],
  ['T', 1e12],
  ['P', 1e15],
];
const SI_BASES = ['FLOP/s', 'FLOPS', 'B/s', 'OP/s', 'OPS', 'Hz'];

// Building an Intl.NumberFormat costs tens of milliseconds in a fresh page (locale data), so
// it is made only for numbers too large to group exactly by hand.
let intlGrouped = null;

/** A value rounded to an integer with thousands separators, as Intl's en-US format writes it. */
export function formatGrouped(value) {
  const rounded = Math.round(Math.abs(value)); // half away from zero, as Intl rounds
  if (!Number.isSafeInteger(rounded)) {
    intlGrouped ??= new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
    return intlGrouped.format(value);
  }
  const digits = String(rounded).replace(/\B(?=(\d{3})+$)/g, ',');
  return value < 0 || Object.is(value, -0) ? `-${digits}` : digits;
}

/** Format a number with about four significant digits; integers >= 1000 get grouping. */
export function formatNumber(value, digits = 4) {
  if (value === null || value === undefined || Number.isNaN(value)) return '—';
  if (!Number.isFinite(value)) return value > 0 ? '∞' : '−∞';
  const abs = Math.abs(value);
  if (abs >= 10 ** digits) return formatGrouped(value);
  if (abs === 0) return '0';
  const text = value.toPrecision(digits);
  if (text.includes('e')) return Number(text).toExponential(Math.max(0, digits - 2));
  return text.includes('.') ? text.replace(/0+$/, '').replace(/\.$/, '') : text;
}

/** Split a unit into what scaling it allows: time units, SI-prefixed rates, or opaque. */
export function parseUnit(unit) {
  const raw = String(unit ?? '').trim();
  const time = TIME_ALIASES[raw] ?? raw;
  const timeIndex = TIME_UNITS.findIndex(([name]) => name === time);
  if (timeIndex >= 0) return { kind: 'time', factor: TIME_UNITS[timeIndex][1], base: 's', raw };
  for (const base of SI_BASES) {
    if (!raw.endsWith(base)) continue;
    const prefix = raw.slice(0, raw.length - base.length);
    const found = SI_PREFIXES.find(([p]) => p === prefix);
    if (found) return { kind: 'si', factor: found[1], base, raw };
  }
  return { kind: 'other', factor: 1, base: raw, raw };
}

function candidates(parsed) {
  if (parsed.kind === 'time') return TIME_UNITS.map(([name, f]) => ({ unit: name, factor: f }));
  if (parsed.kind === 'si') return SI_PREFIXES.map(([p, f]) => ({ unit: p + parsed.base, factor: f }));
  return [];
}

function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/**
 * Choose one display unit for a set of values given in `unit`. The declared unit is kept
 * while the median reads between 1 and 10,000; otherwise the unit that puts it between 1
 * and 1000 is picked. Returns {unit, multiplier}: display = value * multiplier.
 */
export function chooseScale(values, unit) {
  const parsed = parseUnit(unit);
  const options = candidates(parsed);
  const mid = median(values);
  const keep = { unit: parsed.raw, multiplier: 1 };
  if (options.length === 0 || mid === null || mid === 0) return keep;
  if (Math.abs(mid) >= 1 && Math.abs(mid) < 10000) return keep;
  const base = Math.abs(mid) * parsed.factor;
  let pick = options[0];
  for (const option of options) if (base / option.factor >= 1) pick = option;
  return { unit: pick.unit, multiplier: parsed.factor / pick.factor };
}

/** Format a value with a scale from chooseScale (or the identity scale). */
export function formatScaled(value, scale = { multiplier: 1 }) {
  if (value === null || value === undefined) return '—';
  return formatNumber(value * scale.multiplier);
}

/** Format a value with its unit, rescaled to read naturally ("1520 us" -> "1.52 ms"). */
export function formatValue(value, unit) {
  if (value === null || value === undefined) return '—';
  const scale = chooseScale([value], unit);
  return scale.unit ? `${formatNumber(value * scale.multiplier)} ${scale.unit}` : formatNumber(value);
}

/** The p10-p90 spread as a +/- percentage of the headline value. */
export function formatSpread(p10, p90, value) {
  if (![p10, p90, value].every(Number.isFinite) || value === 0) return '—';
  const half = Math.abs(p90 - p10) / 2;
  const pct = (half / Math.abs(value)) * 100;
  if (pct < 0.05) return '±0%';
  return `±${pct < 10 ? pct.toFixed(1) : Math.round(pct)}%`;
}

/** A speed-up factor, "1.31×". */
export function formatSpeedup(factor) {
  if (!Number.isFinite(factor) || factor <= 0) return '—';
  if (factor >= 100) return `${Math.round(factor)}×`;
  return `${factor.toFixed(2)}×`;
}

/** A speed-up interval, "1.73–2.43×" (null without one). */
export function formatInterval(low, high) {
  if (!Number.isFinite(low) || !Number.isFinite(high)) return null;
  return `${formatSpeedup(low).slice(0, -1)}–${formatSpeedup(high)}`;
}

/**
 * A score ({speedup, low, high, basis}) as its ratio and interval texts: `{ratio: "2.08×",
 * interval: "1.73–2.43"}`; no interval for the reference itself or an estimate.
 */
export function formatScore(score) {
  if (!score) return { ratio: '—', interval: null };
  const measured = score.basis === 'side_by_side' ? formatInterval(score.low, score.high) : null;
  return { ratio: formatSpeedup(score.speedup), interval: measured ? measured.slice(0, -1) : null };
}

/** Milliseconds as a short human duration: "850 ms", "12 s", "4 min", "3 h 5 min", "2 d". */
export function formatDuration(ms) {
  if (!Number.isFinite(ms)) return '—';
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)} ms`;
  const s = abs / 1000;
  if (s < 60) return `${Math.floor(s)} s`;
  const min = s / 60;
  if (min < 60) return `${Math.floor(min)} min`;
  const h = Math.floor(min / 60);
  if (h < 24) {
    const rest = Math.floor(min - h * 60);
    return rest ? `${h} h ${rest} min` : `${h} h`;
  }
  return `${Math.floor(h / 24)} d`;
}

/** Parse an ISO-8601 time to epoch milliseconds, or null. */
export function parseTime(iso) {
  if (iso === null || iso === undefined || iso === '') return null;
  if (typeof iso === 'number') return iso;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms;
}

/** "5 min ago" relative to nowMs; older than 30 days becomes the UTC date. */
export function formatRelative(iso, nowMs) {
  const ms = parseTime(iso);
  if (ms === null) return '—';
  const age = nowMs - ms;
  if (age < 5000) return 'just now';
  if (age > 30 * 86400e3) return formatDate(ms);
  return `${formatDuration(age)} ago`;
}

/** "2025-03-04" in UTC. */
export function formatDate(iso) {
  const ms = parseTime(iso);
  if (ms === null) return '—';
  return new Date(ms).toISOString().slice(0, 10);
}

/** "2025-03-04 12:34:56 UTC". */
export function formatTimestamp(iso) {
  const ms = parseTime(iso);
  if (ms === null) return '—';
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A short id for display: the first 8 characters of a UUID, 10 of a commit. */
export function shortId(id, length = 8) {
  if (!id) return '—';
  return String(id).slice(0, length);
}

/** Bytes as "12.3 KiB". */
export function formatBytes(n) {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = n;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i += 1;
  }
  return i === 0 ? `${value} B` : `${formatNumber(value, 3)} ${units[i]}`;
}

/** "latency (us, lower is better)". */
export function describeMetric(metric, unit) {
  if (!metric) return '';
  const shown = unit ?? metric.unit;
  const dir = metric.better === 'higher' ? 'higher is better' : 'lower is better';
  return `${metric.name ?? 'value'} (${shown ? `${shown}, ` : ''}${dir})`;
}
