// Pure chart geometry: linear scales, nice value and time ticks, the best-so-far frontier.

import { compareValues } from './rank.js';
import { formatNumber, parseTime } from './format.js';

/** A linear map from domain [d0, d1] to range [r0, r1]; a flat domain maps to the middle. */
export function linearScale([d0, d1], [r0, r1]) {
  const span = d1 - d0;
  const scale = (v) => (span === 0 ? (r0 + r1) / 2 : r0 + ((v - d0) / span) * (r1 - r0));
  scale.invert = (p) => (r1 === r0 ? d0 : d0 + ((p - r0) / (r1 - r0)) * span);
  scale.domain = [d0, d1];
  scale.range = [r0, r1];
  return scale;
}

/** A "nice" step (1, 2, 2.5 or 5 times a power of ten) near span/count. */
export function niceStep(span, count = 5) {
  if (!(span > 0)) return 1;
  const raw = span / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  const nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  return nice * power;
}

/** Round tick values covering [min, max], about `count` of them. */
export function niceTicks(min, max, count = 5) {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) return [min];
  const step = niceStep(max - min, count);
  const first = Math.ceil(min / step - 1e-9) * step;
  const ticks = [];
  for (let v = first; v <= max + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

/** A value domain padded so points do not touch the frame, extended to nice bounds. */
export function niceDomain(values, padding = 0.08) {
  const finite = values.filter(Number.isFinite);
  if (finite.length === 0) return [0, 1];
  let lo = Math.min(...finite);
  let hi = Math.max(...finite);
  if (lo === hi) {
    const d = Math.abs(lo) * 0.1 || 1;
    lo -= d;
    hi += d;
  }
  const pad = (hi - lo) * padding;
  const step = niceStep(hi - lo + 2 * pad, 5);
  const low = Math.floor((lo - pad) / step) * step;
  return [lo >= 0 && low < 0 ? 0 : low, Math.ceil((hi + pad) / step) * step];
}

const SEC = 1e3;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const TIME_STEPS = [SEC, 2 * SEC, 5 * SEC, 10 * SEC, 15 * SEC, 30 * SEC, MIN, 2 * MIN, 5 * MIN, 15 * MIN, 30 * MIN, HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, 91 * DAY, 365 * DAY];

/** Time ticks (epoch ms, UTC-aligned) covering [t0, t1] with labels fitting the step. */
export function timeTicks(t0, t1, count = 5) {
  if (!Number.isFinite(t0) || !Number.isFinite(t1) || t1 <= t0) {
    return Number.isFinite(t0) ? [{ t: t0, label: timeLabel(t0, DAY) }] : [];
  }
  const step = TIME_STEPS.find((s) => (t1 - t0) / s <= count) ?? TIME_STEPS[TIME_STEPS.length - 1];
  const ticks = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) ticks.push({ t, label: timeLabel(t, step) });
  return ticks;
}

/** A UTC label with the precision a step needs: "14:30:05", "14:30" (midnight shows the date), "Mar 04", "2025-03". */
export function timeLabel(t, step) {
  const iso = new Date(t).toISOString();
  if (step < SEC) return iso.slice(11, 21);
  if (step < MIN && t % DAY !== 0) return iso.slice(11, 19);
  if (step < DAY && t % DAY !== 0) return iso.slice(11, 16);
  if (step < 30 * DAY) return `${MONTHS[Number(iso.slice(5, 7)) - 1]} ${iso.slice(8, 10)}`;
  return iso.slice(0, 7);
}
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * The value range a score's 95 % interval stands for on a chart of values: the interval's
 * relative width carried onto the value (a speed-up `s` in [low, high] over the reference is a
 * value `v` in [v·s/high, v·s/low] when lower is better).
 */
export function scoreBand(value, score, better = 'lower') {
  if (!Number.isFinite(value) || !score || !Number.isFinite(score.low) || !Number.isFinite(score.high) || !(score.speedup > 0)) return null;
  const [a, b] = better === 'higher' ? [score.low / score.speedup, score.high / score.speedup] : [score.speedup / score.high, score.speedup / score.low];
  return [value * Math.min(a, b), value * Math.max(a, b)];
}

/**
 * Bench-history rows (`{value, at, commit, submission_id, submitter_id}`) with what index.json
 * knows of each result: its score (`scoreOf` shape), its p10–p90 spread and its confirmation
 * mark, looked up by submission among `known` ({submission, score, p10, p90, confirmation}
 * entries: `knownResults`, the kernel's index history rows, best and current). Each point gets a
 * `band`: the score's interval where it was measured side by side (`bandKind: 'score'`), else
 * the value's spread (`'spread'`), else none; and its `confirmation` (null: none).
 */
export function withIntervals(rows, known, better = 'lower') {
  const bySubmission = new Map();
  for (const k of known) if (k?.submission) bySubmission.set(k.submission, { ...bySubmission.get(k.submission), ...k });
  return rows.map((row) => {
    const k = bySubmission.get(row.submission_id) ?? {};
    const score = k.score ?? null;
    const fromScore = score?.basis === 'side_by_side' ? scoreBand(row.value, score, better) : null;
    const spread = Number.isFinite(k.p10) && Number.isFinite(k.p90) ? [Math.min(k.p10, k.p90), Math.max(k.p10, k.p90)] : null;
    const band = fromScore ?? spread;
    return { ...row, score, band, bandKind: fromScore ? 'score' : spread ? 'spread' : null, confirmation: k.confirmation ?? null };
  });
}

/** History points sorted by time, each marked when it improved on the best so far. */
export function withFrontier(points, better = 'lower') {
  const sorted = points
    .map((p) => ({ ...p, t: parseTime(p.at) }))
    .filter((p) => p.t !== null && Number.isFinite(p.value))
    .sort((a, b) => a.t - b.t);
  let best = null;
  return sorted.map((p) => {
    const record = best === null || compareValues(p.value, best, better) < 0;
    if (record) best = p.value;
    return { ...p, record, bestSoFar: best };
  });
}

/** The SVG path of the best-so-far step line, extended to xEnd. */
export function frontierPath(points, x, y, xEnd) {
  const records = points.filter((p) => p.record);
  if (records.length === 0) return '';
  let d = `M${x(records[0].t).toFixed(1)},${y(records[0].value).toFixed(1)}`;
  for (const p of records.slice(1)) d += `H${x(p.t).toFixed(1)}V${y(p.value).toFixed(1)}`;
  return `${d}H${xEnd.toFixed(1)}`;
}

/**
 * Everything needed to draw a history chart: scaled points (each with its `band` as the y of
 * its two ends, when it has one), frontier path, ticks. `multiplier` converts stored values
 * into the display unit.
 */
export function chartModel(history, { width = 720, height = 260, better = 'lower', multiplier = 1 } = {}) {
  const margin = { top: 12, right: 16, bottom: 30, left: 60 };
  const points = withFrontier(history, better).map((p) => ({ ...p, shown: p.value * multiplier }));
  const ts = points.map((p) => p.t);
  let [t0, t1] = ts.length ? [Math.min(...ts), Math.max(...ts)] : [0, 1];
  if (t0 === t1) [t0, t1] = [t0 - HOUR, t1 + HOUR];
  const pad = (t1 - t0) * 0.03;
  const x = linearScale([t0 - pad, t1 + pad], [margin.left, width - margin.right]);
  const [v0, v1] = niceDomain(points.flatMap((p) => [p.shown, ...(p.band ?? []).map((v) => v * multiplier)]));
  const y = linearScale([v0, v1], [height - margin.bottom, margin.top]);
  const yTicks = niceTicks(v0, v1, 5).map((v) => ({ v, y: y(v), label: formatNumber(v) }));
  let ticks = timeTicks(t0 - pad, t1 + pad, Math.max(2, Math.floor(width / 140)));
  // Results under a second apart: label the first and the last instead of no round time.
  if (ticks.length < 2 && ts.length) ticks = [...new Set([Math.min(...ts), Math.max(...ts)])].map((t) => ({ t, label: timeLabel(t, 100) }));
  const xTicks = ticks.map((tick) => ({ ...tick, x: x(tick.t) }));
  const placed = points.map((p) => ({ ...p, cx: x(p.t), cy: y(p.shown), band: p.band ? p.band.map((v) => y(v * multiplier)) : null, bandValues: p.band ?? null }));
  const shownY = (v) => y(v * multiplier);
  return {
    width,
    height,
    margin,
    points: placed,
    xTicks,
    yTicks,
    frontier: frontierPath(points, x, shownY, width - margin.right),
  };
}
