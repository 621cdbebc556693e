// Unreviewed boards are listed apart (after the reviewed ones) and suspect bests are marked.
import test from 'node:test';
import assert from 'node:assert/strict';
import { normaliseIndex, orderBoards } from '../../../webui/js/lib/model.js';

const metric = { name: 'latency', unit: 'us', better: 'lower' };
const kernel = (id, value, extra = {}) => {
  const [arch, op_class, sub_class, quant, name] = id.split('/');
  return { id, arch, op_class, sub_class, quant, name, metric, best: { value, submission: `s-${id}` }, accepted_count: 1, disqualified: [], ...extra };
};

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
    leaderboards: { 'cpu/B/x/fp32': [{ kernel_id: 'cpu/B/x/fp32/old', rank: 1, value: 5.0, suspect: true }, { kernel_id: 'cpu/B/x/fp32/other', rank: 2, value: 6.0 }] },
    unreviewed_leaderboards: { 'cpu/A/x/fp32': [{ kernel_id: 'cpu/A/x/fp32/new', rank: 1, value: 2.0 }] },
    boards: { 'cpu/A/x/fp32': { reviewed: false, judge_kernel: 'cpu/A/x/fp32/new' }, 'cpu/B/x/fp32': { reviewed: true } },
  };
  const index = normaliseIndex(raw);
  assert.deepEqual(index.boards.map((b) => [b.key, b.reviewed]), [['cpu/B/x/fp32', true], ['cpu/A/x/fp32', false]]);
  assert.equal(index.boards[1].judgeKernel, 'cpu/A/x/fp32/new');
  assert.equal(index.kernels.get('cpu/B/x/fp32/old').suspect, true);
  assert.equal(index.kernels.get('cpu/B/x/fp32/old').rank, 1); // shown and ranked, but marked
  assert.equal(index.kernels.get('cpu/B/x/fp32/other').suspect, false);
});
