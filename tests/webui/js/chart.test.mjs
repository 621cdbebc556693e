// Chart scales map linearly, ticks are round numbers and times, the frontier steps to new bests.
import test from 'node:test';
import assert from 'node:assert/strict';
import { chartModel, frontierPath, linearScale, niceDomain, niceStep, niceTicks, timeLabel, timeTicks, withFrontier } from '../../../webui/js/lib/chart.js';

test('linearScale maps and inverts, and a flat domain maps to the middle', () => {
  const s = linearScale([0, 10], [100, 200]);
  assert.equal(s(5), 150);
  assert.equal(s.invert(150), 5);
  assert.equal(linearScale([3, 3], [0, 10])(3), 5);
});

test('niceStep and niceTicks choose 1/2/2.5/5 x 10^k steps', () => {
  assert.equal(niceStep(100, 5), 20);
  assert.equal(niceStep(0.9, 5), 0.2);
  assert.deepEqual(niceTicks(0, 100, 5), [0, 20, 40, 60, 80, 100]);
  assert.deepEqual(niceTicks(401, 499, 4), [425, 450, 475]);
  assert.deepEqual(niceTicks(5, 5), [5]);
});

test('niceDomain pads to round bounds and never crosses zero for positive data', () => {
  const [lo, hi] = niceDomain([412.6, 498.1]);
  assert.ok(lo < 412.6 && hi > 498.1);
  assert.equal(lo % 25, 0);
  assert.equal(niceDomain([1, 2])[0] >= 0, true);
  assert.deepEqual(niceDomain([]), [0, 1]);
});

test('timeTicks fit the span and label midnight with the date', () => {
  const t0 = Date.parse('2025-05-01T09:00:00Z');
  const ticks = timeTicks(t0, t0 + 5 * 86400e3, 6);
  assert.ok(ticks.length >= 3 && ticks.length <= 6);
  assert.equal(ticks[0].label, 'May 02');
  assert.equal(timeLabel(Date.parse('2025-05-01T14:30:00Z'), 3600e3), '14:30');
  assert.equal(timeLabel(Date.parse('2025-05-01T00:00:00Z'), 3600e3), 'May 01');
  assert.equal(timeLabel(Date.parse('2025-05-01T00:00:00Z'), 91 * 86400e3), '2025-05');
});

const history = [
  { value: 500, at: '2025-05-01T00:00:00Z', commit: 'a' },
  { value: 450, at: '2025-05-02T00:00:00Z', commit: 'b' },
  { value: 470, at: '2025-05-03T00:00:00Z', commit: 'c' },
  { value: 420, at: '2025-05-04T00:00:00Z', commit: 'd' },
];

test('results seconds apart get second ticks labelled with seconds', () => {
  const t0 = Date.parse('2026-11-30T04:45:47Z');
  const ticks = timeTicks(t0, t0 + 3000, 5);
  assert.ok(ticks.length >= 2);
  assert.ok(ticks.every((t) => /^\d\d:\d\d:\d\d$/.test(t.label)), JSON.stringify(ticks));
  assert.equal(timeLabel(Date.parse('2026-11-30T04:45:48Z'), 1000), '04:45:48');
  const close = chartModel([{ value: 2, at: '2026-11-30T04:54:09.1Z' }, { value: 1, at: '2026-11-30T04:54:09.8Z' }], { width: 800 });
  assert.deepEqual(close.xTicks.map((t) => t.label), ['04:54:09.1', '04:54:09.8']);
});

test('withFrontier marks new bests in the metric direction, in time order', () => {
  const lower = withFrontier([...history].reverse(), 'lower');
  assert.deepEqual(lower.map((p) => p.record), [true, true, false, true]);
  assert.deepEqual(lower.map((p) => p.bestSoFar), [500, 450, 450, 420]);
  const higher = withFrontier(history, 'higher');
  assert.deepEqual(higher.map((p) => p.record), [true, false, false, false]);
});

test('frontierPath steps horizontally then vertically to each record', () => {
  const pts = withFrontier(history, 'lower');
  const d = frontierPath(pts, (t) => (t - pts[0].t) / 86400e3, (v) => v, 10);
  assert.equal(d, 'M0.0,500.0H1.0V450.0H3.0V420.0H10.0');
});

test('chartModel places every point inside the frame with ticks on both axes', () => {
  const m = chartModel(history, { width: 600, height: 240, better: 'lower' });
  assert.equal(m.points.length, 4);
  for (const p of m.points) {
    assert.ok(p.cx >= m.margin.left && p.cx <= 600 - m.margin.right);
    assert.ok(p.cy >= m.margin.top && p.cy <= 240 - m.margin.bottom);
  }
  const best = m.points.find((p) => p.value === 420);
  const worst = m.points.find((p) => p.value === 500);
  assert.ok(best.cy > worst.cy, 'smaller values are drawn lower');
  assert.ok(m.yTicks.length >= 3 && m.xTicks.length >= 2);
  assert.match(m.frontier, /^M/);
  assert.equal(chartModel([history[0]], {}).points.length, 1);
});

test('a point carries its score interval where measured side by side, else its spread', async () => {
  const { scoreBand, withIntervals } = await import('../../../webui/js/lib/chart.js');
  const rows = [
    { value: 400, at: '2025-05-01T00:00:00Z', submission_id: 'a' },
    { value: 200, at: '2025-05-02T00:00:00Z', submission_id: 'b' },
    { value: 300, at: '2025-05-03T00:00:00Z', submission_id: 'c' },
  ];
  const known = [
    { submission: 'a', score: null, p10: 390, p90: 420 },
    { submission: 'b', score: { speedup: 2, low: 1.6, high: 2.5, basis: 'side_by_side' }, p10: 199, p90: 201 },
    { submission: 'c', score: { speedup: 1.3, low: null, high: null, basis: 'absolute' } },
  ];
  const points = withIntervals(rows, known, 'lower');
  assert.deepEqual(points.map((p) => p.bandKind), ['spread', 'score', null]);
  assert.deepEqual(points[0].band, [390, 420]);
  assert.deepEqual(points[1].band, [160, 250], 'v·s/high to v·s/low: the interval at the value');
  assert.equal(points[2].score.basis, 'absolute');
  assert.deepEqual(scoreBand(100, { speedup: 2, low: 1.6, high: 2.5 }, 'higher'), [80, 125]);
  const m = chartModel(points, { width: 600, height: 240 });
  const [y0, y1] = m.points.find((p) => p.submission_id === 'b').band;
  assert.ok(y0 > y1, 'the lower end is drawn lower');
  assert.ok(m.points.every((p) => !p.band || p.band.every((y) => y >= m.margin.top && y <= 240 - m.margin.bottom)), 'bands fit the frame');
});

test("every history point draws its own score interval, from the index's history rows", async () => {
  const { readFileSync } = await import('node:fs');
  const { withIntervals } = await import('../../../webui/js/lib/chart.js');
  const { knownResults, normaliseIndex } = await import('../../../webui/js/lib/model.js');
  const doc = JSON.parse(readFileSync(new URL('./fixtures/confirmations.json', import.meta.url)));
  const fast = normaliseIndex(doc).kernels.get('sm90/Norm/RMSNorm/fp16/fast');
  // /api/kernels/{id}/bench-history rows of the kernel: only the newest is its best and current.
  const rows = fast.history.map((r) => ({ value: r.value, at: r.at, submission_id: r.submission }));
  const points = withIntervals(rows, knownResults(fast), 'lower');
  assert.deepEqual(points.map((p) => p.bandKind), ['score', 'score'], 'the older result has its interval too');
  assert.deepEqual(points[0].band.map((v) => Number(v.toFixed(3))), [Number((600 * 1.5 / 1.55).toFixed(3)), Number((600 * 1.5 / 1.45).toFixed(3))]);
  assert.deepEqual(points.map((p) => p.confirmation), ['confirmed', 'unconfirmed']);
  const m = chartModel(points, { width: 600, height: 240 });
  assert.deepEqual(m.points.map((p) => p.confirmation), ['confirmed', 'unconfirmed']);
  const plain = withIntervals([{ value: 1, at: '2025-05-01T00:00:00Z', submission_id: 'x' }], [], 'lower');
  assert.equal(plain[0].confirmation, null);
});
