// The metric's direction decides which of two values is better; missing values are worse.
import test from 'node:test';
import assert from 'node:assert/strict';
import * as rank from '../../../webui/js/lib/rank.js';

test('compareValues follows the direction and puts missing values last in both', () => {
  assert.equal(rank.compareValues(3, 5, 'lower'), -1);
  assert.equal(rank.compareValues(3, 5, 'higher'), 1);
  assert.equal(rank.compareValues(4, 4, 'higher'), 0);
  assert.equal(rank.compareValues(null, 5, 'lower'), 1);
  assert.equal(rank.compareValues(5, null, 'higher'), -1);
});

test('the UI ranks nothing itself: no ranking, tie or reference guessing is left to call', () => {
  assert.deepEqual(Object.keys(rank), ['compareValues']);
});
