// Ranking follows the metric's direction; overlapping spreads are ties; speed-ups use the reference.
import test from 'node:test';
import assert from 'node:assert/strict';
import { compareValues, findReference, rankEntries, speedup, spreadsOverlap } from '../../../webui/js/lib/rank.js';

const e = (id, value, p10 = null, p90 = null, extra = {}) => ({ id, name: id, value, p10, p90, ...extra });

test('lower-is-better ranks the smallest value first', () => {
  const ranked = rankEntries([e('b', 20), e('a', 10), e('c', 30)], 'lower');
  assert.deepEqual(ranked.map((r) => [r.id, r.rank]), [['a', 1], ['b', 2], ['c', 3]]);
});

test('higher-is-better ranks the largest value first', () => {
  const ranked = rankEntries([e('b', 20), e('a', 10), e('c', 30)], 'higher');
  assert.deepEqual(ranked.map((r) => r.id), ['c', 'b', 'a']);
});

test('equal values share a rank and the next rank skips', () => {
  const ranked = rankEntries([e('a', 10), e('b', 10), e('c', 12)], 'lower');
  assert.deepEqual(ranked.map((r) => r.rank), [1, 1, 3]);
});

test('disqualified and value-less entries come last, unranked but present', () => {
  const ranked = rankEntries([e('dq', 1, null, null, { disqualified: true }), e('none', null), e('ok', 50)], 'lower');
  assert.deepEqual(ranked.map((r) => [r.id, r.rank]), [['ok', 1], ['none', null], ['dq', null]]);
});

test('neighbours whose p10-p90 spreads overlap are marked as a tie', () => {
  const ranked = rankEntries([e('a', 100, 99, 101), e('b', 100.5, 100.2, 102), e('c', 110, 109, 111)], 'lower');
  assert.deepEqual(ranked.map((r) => r.tie), [true, true, false]);
  assert.deepEqual(ranked[0].tieWith, ['b']);
  assert.deepEqual(ranked[1].tieWith, ['a']);
});

test('spreadsOverlap treats a missing spread as the point value', () => {
  assert.equal(spreadsOverlap(e('a', 10, 9, 11), e('b', 10.5)), true);
  assert.equal(spreadsOverlap(e('a', 10), e('b', 10.5)), false);
  assert.equal(spreadsOverlap(e('a', null), e('b', 10)), false);
});

test('compareValues puts missing values last in both directions', () => {
  assert.equal(compareValues(null, 5, 'lower'), 1);
  assert.equal(compareValues(5, null, 'higher'), -1);
  assert.equal(compareValues(3, 5, 'higher'), 1);
});

test('speed-up is how many times better than the reference in the direction', () => {
  assert.equal(speedup(50, 100, 'lower'), 2);
  assert.equal(speedup(200, 100, 'higher'), 2);
  assert.equal(speedup(100, null, 'lower'), null);
  assert.equal(speedup(0, 100, 'lower'), null);
});

test('findReference prefers the named id, then a flag or tag, then a *_ref name', () => {
  const entries = [e('x/a'), { ...e('x/b'), name: 'torch_ref' }, { ...e('x/c'), tags: ['reference'] }];
  assert.equal(findReference(entries, 'x/a').id, 'x/a');
  assert.equal(findReference(entries).id, 'x/c');
  assert.equal(findReference(entries.slice(0, 2)).id, 'x/b');
  assert.equal(findReference([e('x/a')]), null);
});
