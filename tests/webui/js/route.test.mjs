// Hash routes parse into views with params and query, and format back to the same hash.
import test from 'node:test';
import assert from 'node:assert/strict';
import { formatHash, links, parseHash } from '../../../webui/js/lib/route.js';

test('every view parses from its deep link', () => {
  assert.deepEqual(parseHash(''), { view: 'boards', params: {}, query: {} });
  assert.deepEqual(parseHash('#/'), { view: 'boards', params: {}, query: {} });
  assert.equal(parseHash('#/activity').view, 'activity');
  const board = parseHash('#/board/sm90/GEMM/dense/fp8?q=tile&at=12');
  assert.equal(board.view, 'board');
  assert.equal(board.params.group, 'sm90/GEMM/dense/fp8');
  assert.deepEqual(board.query, { q: 'tile', at: '12' });
  assert.deepEqual(parseHash('#/kernel/sm90/Attention/MHA/fp16/flash_v3').params, { id: 'sm90/Attention/MHA/fp16/flash_v3' });
  assert.deepEqual(parseHash('#/submission/60741ac8-c0f4-5bdd-b552-19f978571cdb').params, { id: '60741ac8-c0f4-5bdd-b552-19f978571cdb' });
});

test('a kernel id in one %2F-encoded segment is accepted', () => {
  assert.deepEqual(parseHash('#/kernel/sm90%2FAttention%2FMHA%2Ffp16%2Fflash_v3').params, { id: 'sm90/Attention/MHA/fp16/flash_v3' });
});

test('wrong shapes are not found', () => {
  assert.equal(parseHash('#/kernel/sm90/Attention').view, 'notfound');
  assert.equal(parseHash('#/board/sm90').view, 'notfound');
  assert.equal(parseHash('#/nope').view, 'notfound');
});

test('formatHash drops empty query values and sorts keys', () => {
  assert.equal(formatHash('boards', {}, { q: '', arch: 'sm90', at: null }), '#/?arch=sm90');
  assert.equal(formatHash('board', { group: 'sm90/GEMM/dense/fp8' }, { sort: 'value', dir: 'desc' }), '#/board/sm90/GEMM/dense/fp8?dir=desc&sort=value');
  assert.equal(links.kernel('cpu/Norm/RMSNorm/fp32/numpy_ref'), '#/kernel/cpu/Norm/RMSNorm/fp32/numpy_ref');
  assert.equal(links.activity(), '#/activity');
  assert.equal(links.commit('9206f0040f7280f25fee3954d05af20c5e19e137'), '#/commit/9206f0040f7280f25fee3954d05af20c5e19e137');
});

test('a commit id is a route of its own', () => {
  assert.deepEqual(parseHash('#/commit/9206f0040f7280f25fee3954d05af20c5e19e137'), { view: 'commit', params: { id: '9206f0040f7280f25fee3954d05af20c5e19e137' }, query: {} });
  assert.equal(parseHash('#/commit/a/b').view, 'notfound');
});

test('parse and format round-trip', () => {
  for (const hash of ['#/', '#/activity', '#/board/gfx942/GEMM/dense/fp8?at=63&q=tile+256', '#/kernel/sm90/Norm/RMSNorm/bf16/torch_ref', '#/submission/abc', '#/commit/0571cc596a9049842bf22a7ccbf7cea0b82d0594']) {
    const r = parseHash(hash);
    assert.equal(formatHash(r.view, r.params, r.query), hash);
  }
});
