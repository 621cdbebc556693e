// Unreviewed boards are listed apart (after the reviewed ones) and suspect bests are marked;
// an index from before boards were reviewed reads as all reviewed, nothing suspect.
import test from 'node:test';
import assert from 'node:assert/strict';
import { boardReviewed, normaliseIndex, normaliseKernel, orderBoards } from '../../../webui/js/lib/model.js';

const metric = { name: 'latency', unit: 'us', better: 'lower' };
const kernel = (id, value, extra = {}) => ({ id, metric, best: { value, submission: `s-${id}` }, accepted_count: 1, ...extra });

test('a board is reviewed by its boards entry, else by its kernels, else it is', () => {
  assert.equal(boardReviewed({ reviewed: false }, []), false);
  assert.equal(boardReviewed({ reviewed: true }, [{ board_reviewed: false }]), true);
  assert.equal(boardReviewed(undefined, [{ board_reviewed: false }]), false);
  assert.equal(boardReviewed(undefined, [{}]), true);
});

test('unreviewed boards come after every reviewed one, each part in key order', () => {
  const reviewed = new Set(['b/x/y/fp32', 'd/x/y/fp32']);
  assert.deepEqual(orderBoards(['d/x/y/fp32', 'c/x/y/fp32', 'a/x/y/fp32', 'b/x/y/fp32'], (k) => reviewed.has(k)), ['b/x/y/fp32', 'd/x/y/fp32', 'a/x/y/fp32', 'c/x/y/fp32']);
});

test('the index marks unreviewed boards and suspect bests', () => {
  const raw = {
    schema_version: 1,
    kernels: [
      kernel('cpu/A/x/fp32/new', 2.0, { board_reviewed: false }),
      kernel('cpu/B/x/fp32/old', 5.0, { board_reviewed: true, best: { value: 5.0, suspect: true } }),
      kernel('cpu/B/x/fp32/other', 6.0, { board_reviewed: true }),
    ],
    leaderboards: { 'cpu/B/x/fp32': [] },
    unreviewed_leaderboards: { 'cpu/A/x/fp32': [] },
    boards: { 'cpu/A/x/fp32': { reviewed: false, judge_kernel: 'cpu/A/x/fp32/new' }, 'cpu/B/x/fp32': { reviewed: true } },
  };
  const index = normaliseIndex(raw);
  assert.deepEqual(index.boards.map((b) => [b.key, b.reviewed]), [['cpu/B/x/fp32', true], ['cpu/A/x/fp32', false]]);
  assert.equal(index.boards[1].judgeKernel, 'cpu/A/x/fp32/new');
  assert.equal(index.kernels.get('cpu/B/x/fp32/old').suspect, true);
  assert.equal(index.kernels.get('cpu/B/x/fp32/old').rank, 1); // shown and ranked, but marked
  assert.equal(index.kernels.get('cpu/B/x/fp32/other').suspect, false);
});

test('an index without review fields reads as reviewed boards and no suspect', () => {
  const k = normaliseKernel(kernel('cpu/A/x/fp32/k', 1.0));
  assert.equal(k.boardReviewed, true);
  assert.equal(k.suspect, false);
  assert.equal(normaliseIndex({ kernels: [kernel('cpu/A/x/fp32/k', 1.0)], leaderboards: {} }).boards[0].reviewed, true);
});
