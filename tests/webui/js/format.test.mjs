// Units, numbers, spreads and times format the way the tables show them.
import test from 'node:test';
import assert from 'node:assert/strict';
import {
  chooseScale, describeMetric, formatBytes, formatDuration, formatGrouped, formatNumber, formatRelative,
  formatScaled, formatSpeedup, formatSpread, formatTimestamp, formatValue, parseUnit, shortId,
} from '../../../webui/js/lib/format.js';

test('formatNumber keeps four significant digits and groups large integers', () => {
  const cases = [[412.6, '412.6'], [412.649, '412.6'], [1184, '1184'], [12345.6, '12,346'], [0.5, '0.5'], [7.1, '7.1'], [0, '0'], [-3.25, '-3.25'], [null, '—'], [NaN, '—'], [Infinity, '∞']];
  for (const [input, want] of cases) assert.equal(formatNumber(input), want, `formatNumber(${input})`);
});

test('formatGrouped writes what Intl en-US writes, without building a formatter for safe integers', () => {
  const intl = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const cases = [0, -0, 0.4, -0.4, 0.5, -0.5, 2.5, -2.5, 999.5, 9999.5, 10000, 12345.5, -12345.5, 99999.49999999999, 123456789, -987654321.5, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 1e21, 1.2345678901234567e25, -1e300];
  for (let i = 0; i < 2000; i += 1) cases.push((i % 2 ? -1 : 1) * ((i * 7919) % 104729) ** (1 + (i % 3)) / (1 + (i % 7)));
  for (const value of cases) assert.equal(formatGrouped(value), intl.format(value), `formatGrouped(${value})`);
});

test('parseUnit recognises time units, SI rates and opaque units', () => {
  assert.deepEqual([parseUnit('us').kind, parseUnit('µs').kind, parseUnit('ms').factor], ['time', 'time', 1e-3]);
  assert.equal(parseUnit('TFLOP/s').kind, 'si');
  assert.equal(parseUnit('TFLOP/s').factor, 1e12);
  assert.equal(parseUnit('GB/s').base, 'B/s');
  assert.equal(parseUnit('tokens/s').kind, 'other');
});

test('chooseScale keeps the declared unit while it reads well and rescales otherwise', () => {
  assert.deepEqual(chooseScale([412.6, 1184], 'us'), { unit: 'us', multiplier: 1 });
  assert.deepEqual(chooseScale([1520], 'us'), { unit: 'us', multiplier: 1 });
  const ms = chooseScale([25000, 31000, 40000], 'us');
  assert.equal(ms.unit, 'ms');
  assert.equal(formatScaled(25000, ms), '25');
  const ns = chooseScale([0.0004], 'ms');
  assert.equal(ns.unit, 'ns');
  assert.equal(formatScaled(0.0004, ns), '400');
  const pflops = chooseScale([15000, 20000], 'TFLOP/s');
  assert.equal(pflops.unit, 'PFLOP/s');
  assert.deepEqual(chooseScale([3, 4], 'tokens/s'), { unit: 'tokens/s', multiplier: 1 });
  assert.deepEqual(chooseScale([], 'us'), { unit: 'us', multiplier: 1 });
});

test('formatValue writes a single value in a natural unit', () => {
  assert.equal(formatValue(0.00152, 's'), '1.52 ms');
  assert.equal(formatValue(412.6, 'us'), '412.6 us');
  assert.equal(formatValue(null, 'us'), '—');
  assert.equal(formatValue(3, ''), '3');
});

test('formatSpread shows half the p10-p90 width relative to the value', () => {
  assert.equal(formatSpread(99, 101, 100), '±1.0%');
  assert.equal(formatSpread(80, 120, 100), '±20%');
  assert.equal(formatSpread(100, 100, 100), '±0%');
  assert.equal(formatSpread(null, 101, 100), '—');
});

test('formatSpeedup writes factors with two decimals', () => {
  assert.equal(formatSpeedup(2.871), '2.87×');
  assert.equal(formatSpeedup(1), '1.00×');
  assert.equal(formatSpeedup(250.4), '250×');
  assert.equal(formatSpeedup(null), '—');
});

test('durations and relative times read as a person would say them', () => {
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(12_500), '12 s');
  assert.equal(formatDuration(4 * 60e3 + 5000), '4 min');
  assert.equal(formatDuration(3 * 3600e3 + 5 * 60e3), '3 h 5 min');
  assert.equal(formatDuration(2 * 86400e3), '2 d');
  const now = Date.parse('2025-05-12T12:00:00Z');
  assert.equal(formatRelative('2025-05-12T11:59:58Z', now), 'just now');
  assert.equal(formatRelative('2025-05-12T11:55:00Z', now), '5 min ago');
  assert.equal(formatRelative('2025-03-01T00:00:00Z', now), '2025-03-01');
  assert.equal(formatRelative(null, now), '—');
  assert.equal(formatTimestamp('2025-05-12T11:55:00Z'), '2025-05-12 11:55:00 UTC');
});

test('small helpers: ids, bytes, metric description', () => {
  assert.equal(shortId('60741ac8-c0f4-5bdd-b552-19f978571cdb'), '60741ac8');
  assert.equal(shortId(null), '—');
  assert.equal(formatBytes(549), '549 B');
  assert.equal(formatBytes(2048), '2 KiB');
  assert.equal(describeMetric({ name: 'latency', unit: 'us', better: 'lower' }), 'latency (us, lower is better)');
  assert.equal(describeMetric({ name: 'throughput', better: 'higher' }, 'PFLOP/s'), 'throughput (PFLOP/s, higher is better)');
});

test('a score reads as ratio and interval; the reference and an estimate have no interval', async () => {
  const { formatInterval, formatScore } = await import('../../../webui/js/lib/format.js');
  assert.deepEqual(formatScore({ speedup: 2.08, low: 1.73, high: 2.43, basis: 'side_by_side' }), { ratio: '2.08×', interval: '1.73–2.43' });
  assert.deepEqual(formatScore({ speedup: 1, low: 1, high: 1, basis: 'reference' }), { ratio: '1.00×', interval: null });
  assert.deepEqual(formatScore({ speedup: 0.5, low: null, high: null, basis: 'absolute' }), { ratio: '0.50×', interval: null });
  assert.deepEqual(formatScore(null), { ratio: '—', interval: null });
  assert.equal(formatInterval(0.475, 0.525), '0.47–0.53×');
  assert.equal(formatInterval(null, 1), null);
});
