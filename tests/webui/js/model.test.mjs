// index.json normalises into ranked boards that filter, sort and page; 10,000 kernels stay fast.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { facets, filterBoards, locateKernel, normaliseIndex, normaliseScore, pageOf, sortEntries, spreadFromWorkloads } from '../../../webui/js/lib/model.js';

const fixture = JSON.parse(readFileSync(new URL('../fixtures/index.json', import.meta.url)));

/** A generated index of n kernels over 8 archs x 5 op classes x 5 quants. */
export function bigIndex(n) {
  const archs = ['sm80', 'sm89', 'sm90', 'sm100', 'gfx90a', 'gfx942', 'gfx950', 'cpu'];
  const ops = ['Attention', 'GEMM', 'Norm', 'MoE', 'Quant'];
  const quants = ['fp32', 'bf16', 'fp16', 'fp8', 'int4'];
  const kernels = [];
  for (let i = 0; i < n; i += 1) {
    const arch = archs[i % 8];
    const op = ops[Math.floor(i / 8) % 5];
    const quant = quants[Math.floor(i / 40) % 5];
    const value = 100 + ((i * 7919) % 1000) / 10;
    kernels.push({
      id: `${arch}/${op}/main/${quant}/k${i}`, title: `kernel ${i}`, language: i % 3 ? 'cuda' : 'triton',
      metric: { name: 'latency', unit: 'us', better: 'lower' },
      best: { value, p10: value * 0.99, p90: value * 1.01, submitter: `s${i % 17}`, at: '2025-05-01T00:00:00Z' },
      accepted_count: 1 + (i % 5), last_activity_at: '2025-05-01T00:00:00Z', disqualified: i % 501 === 0 ? { reason: 'x' } : undefined,
    });
  }
  return { schema_version: 1, log_seq: n, kernels, leaderboards: {}, queue: {}, runners: [] };
}

test('the fixture index becomes one ranked board per arch/op_class/sub_class/quant', () => {
  const index = normaliseIndex(fixture);
  assert.equal(index.boards.length, 8);
  assert.equal(index.kernels.size, fixture.kernels.length);
  const mha = index.boards.find((b) => b.key === 'sm90/Attention/MHA/fp16');
  assert.equal(mha.entries[0].id, 'sm90/Attention/MHA/fp16/flash_v3');
  assert.equal(mha.referenceId, 'sm90/Attention/MHA/fp16/torch_sdpa_ref');
  const last = mha.entries.at(-1);
  assert.equal(last.disqualified, true);
  assert.equal(last.rank, null);
  assert.ok(mha.entries.some((e) => e.tie), 'tilelang_fa and triton_fa_v2 overlap');
  const gemm = index.boards.find((b) => b.key === 'sm90/GEMM/dense/fp8');
  assert.equal(gemm.metric.better, 'higher');
  assert.ok(gemm.entries[0].value > gemm.entries[1].value);
  assert.ok(gemm.entries[0].speedup > 1);
});

test('queue and runners come through in a stable order', () => {
  const index = normaliseIndex(fixture);
  assert.deepEqual(index.queue.map((q) => q.arch), ['cpu', 'gfx942', 'sm90']);
  assert.ok(index.runners.every((r) => r.id && r.arches.length && r.lastHeartbeatAt));
});

test('kernels given as an object keyed by id are accepted too', () => {
  const index = normaliseIndex({ kernels: { 'cpu/Norm/RMSNorm/fp32/a': { best: 3 }, 'cpu/Norm/RMSNorm/fp32/b': { best: { value: 2 } } } });
  assert.deepEqual(index.boards[0].entries.map((e) => e.name), ['b', 'a']);
});

test('a score without p10/p90 takes its spread from the workloads stats', () => {
  const s = normaliseScore({ value: 100, workloads: [{ name: 'w', stats: { median: 50, p10: 49, p90: 52 } }] });
  assert.equal(s.p10, 98);
  assert.equal(s.p90, 104);
  assert.deepEqual(spreadFromWorkloads([], 1), { p10: null, p90: null });
  assert.equal(normaliseScore(null), null);
});

test('filters narrow boards and search narrows rows, keeping whole-board ranks', () => {
  const index = normaliseIndex(fixture);
  const gfx = filterBoards(index.boards, { arch: 'gfx942' });
  assert.deepEqual(gfx.map((b) => b.arch), ['gfx942', 'gfx942']);
  const triton = filterBoards(index.boards, { q: 'triton' });
  assert.ok(triton.length >= 3);
  for (const b of triton) assert.ok(b.entries.every((e) => `${e.id} ${e.title} ${e.language}`.toLowerCase().includes('triton')));
  const fa = triton.find((b) => b.key === 'sm90/Attention/MHA/fp16').entries.find((e) => e.name === 'triton_fa_v2');
  assert.equal(fa.rank, 3);
  assert.deepEqual(filterBoards(index.boards, { q: 'no-such-kernel' }), []);
  assert.deepEqual(facets(index.boards).arch, ['cpu', 'gfx942', 'sm100', 'sm90']);
});

test('sorting by a column keeps missing values last in both directions', () => {
  const entries = [{ name: 'a', value: 3, rank: 2 }, { name: 'b', value: null, rank: null }, { name: 'c', value: 1, rank: 1 }];
  assert.deepEqual(sortEntries(entries, 'value', 'asc').map((e) => e.name), ['c', 'a', 'b']);
  assert.deepEqual(sortEntries(entries, 'value', 'desc').map((e) => e.name), ['a', 'c', 'b']);
  assert.deepEqual(sortEntries(entries, 'name', 'desc').map((e) => e.name), ['c', 'b', 'a']);
  assert.deepEqual(sortEntries(entries).map((e) => e.name), ['c', 'a', 'b']);
});

test('pageOf clamps the page and reports the totals', () => {
  const items = Array.from({ length: 250 }, (_, i) => i);
  assert.deepEqual(pageOf(items, 3, 100).items, items.slice(200));
  assert.equal(pageOf(items, 99, 100).page, 3);
  assert.equal(pageOf(items, 'x', 100).page, 1);
  assert.equal(pageOf([], 1, 10).pages, 1);
});

test('locateKernel finds the board and rank of a kernel', () => {
  const index = normaliseIndex(fixture);
  const found = locateKernel(index, 'sm90/GEMM/dense/fp8/cublaslt_ref');
  assert.equal(found.board.key, 'sm90/GEMM/dense/fp8');
  assert.equal(found.entry.isReference, true);
  assert.equal(locateKernel(index, 'x/y/z/w/v'), null);
});

test('10,000 kernels normalise, filter, sort and page into a bounded first page', () => {
  const started = performance.now();
  const index = normaliseIndex(bigIndex(10_000));
  const boards = filterBoards(index.boards, { q: 'cuda' });
  const page = pageOf(boards, 1, 8);
  const rows = page.items.flatMap((b) => sortEntries(b.entries, 'value', 'asc').slice(0, 10));
  const elapsed = performance.now() - started;
  assert.equal(index.kernels.size, 10_000);
  assert.equal(index.boards.length, 200);
  assert.equal(page.items.length, 8);
  assert.equal(rows.length, 80);
  assert.equal(index.boards.reduce((n, b) => n + b.entries.length, 0), 10_000);
  assert.ok(index.boards.every((b) => b.entries.every((e, i, all) => i === 0 || e.disqualified || all[i - 1].value <= e.value)));
  console.log(`# 10,000 kernels: normalise + filter + sort + page in ${elapsed.toFixed(0)} ms`);
});
