// index.json (the real projection's shape) normalises into ranked boards that filter, sort and
// page; a board is built when first read, with the rows of building them all at once.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { buildBoards, disqualification, facets, filterBoards, kernelChanged, locateKernel, normaliseIndex, normaliseKernel, normaliseScore, pageOf, samplesOf, sortEntries, spreadFromWorkloads, workloadParams } from '../../../webui/js/lib/model.js';
import { findReference, rankEntries, speedup } from '../../../webui/js/lib/rank.js';

const real = JSON.parse(readFileSync(new URL('./fixtures/index.json', import.meta.url)));
const board = JSON.parse(readFileSync(new URL('./fixtures/board.json', import.meta.url)));

/** A generated index of n kernels over 8 archs x 5 op classes x 5 quants, index.json-shaped. */
export function bigIndex(n) {
  const archs = ['sm80', 'sm89', 'sm90', 'sm100', 'gfx90a', 'gfx942', 'gfx950', 'cpu'];
  const ops = ['Attention', 'GEMM', 'Norm', 'MoE', 'Quant'];
  const quants = ['fp32', 'bf16', 'fp16', 'fp8', 'int4'];
  const kernels = [];
  for (let i = 0; i < n; i += 1) {
    const [arch, op, quant] = [archs[i % 8], ops[Math.floor(i / 8) % 5], quants[Math.floor(i / 40) % 5]];
    const value = 100 + ((i * 7919) % 1000) / 10;
    const dq = i % 501 === 0;
    const score = { value, spread: { p10: value * 0.99, p90: value * 1.01 }, submitter: `s${i % 17}`, submission: `sub${i}`, at: '2025-05-01T00:00:00Z', commit: null };
    kernels.push({
      id: `${arch}/${op}/main/${quant}/k${i}`, arch, op_class: op, sub_class: 'main', quant, name: `k${i}`,
      title: `kernel ${i}`, language: i % 3 ? 'cuda' : 'triton', metric: { name: 'latency', unit: 'us', better: 'lower' },
      best: dq ? null : score, current: dq ? null : score, accepted_count: dq ? 0 : 1 + (i % 5),
      last_activity_at: '2025-05-01T00:00:00Z', disqualified: dq ? [`sub${i}`] : [], history: [],
    });
  }
  return { schema_version: 1, log_seq: n, kernels, leaderboards: {}, queue: {}, runners: [] };
}

test('a real index becomes one ranked board per arch/op_class/sub_class/quant', () => {
  const index = normaliseIndex(real);
  assert.equal(index.logSeq, real.log_seq);
  assert.equal(index.kernels.size, real.kernels.length);
  assert.deepEqual(index.boards.map((b) => b.key), ['cpu/GEMM/dense/fp32', 'cpu/Norm/RMSNorm/fp32', 'cpu/Softmax/row/fp32', 'sm90/Norm/RMSNorm/bf16']);
  for (const [key, ranked] of Object.entries(real.leaderboards)) {
    const b = index.boards.find((x) => x.key === key);
    assert.deepEqual(b.entries.map((e) => e.id), ranked.map((r) => r.kernel_id), `${key} ranks as the projection does`);
    assert.deepEqual(b.entries.map((e) => e.rank), ranked.map((r) => r.rank));
    assert.equal(b.referenceId, `${key}/numpy_ref`);
  }
  const norm = index.boards.find((b) => b.key === 'cpu/Norm/RMSNorm/fp32');
  assert.equal(norm.entries[0].speedup.toFixed(2), (412.5 / 96.3).toFixed(2));
  assert.equal(norm.entries.find((e) => e.isReference).speedup, 1);
  const top = norm.entries[0];
  assert.equal(top.submitter, 'ada');
  assert.match(top.best.submission_id, /^[0-9a-f-]{36}$/);
  assert.match(top.best.commit, /^[0-9a-f]{40}$/);
  assert.equal(top.p10, 96.3);
  assert.ok(index.boards.every((b) => b.entries.every((e) => !e.disqualified)), 'an empty disqualified list marks nothing');
  const unscored = index.boards.find((b) => b.key === 'sm90/Norm/RMSNorm/bf16').entries[0];
  assert.equal(unscored.value, null);
  assert.equal(unscored.rank, null);
});

test('ties, the reference and a disqualified kernel on a projected board', () => {
  const index = normaliseIndex(board);
  const mha = index.boards.find((b) => b.key === 'sm90/Attention/MHA/fp16');
  assert.deepEqual(mha.entries.map((e) => e.name), ['flash_v3', 'tilelang_fa', 'triton_fa_v2', 'torch_sdpa_ref', 'cutlass_fmha']);
  assert.equal(mha.referenceId, 'sm90/Attention/MHA/fp16/torch_sdpa_ref');
  const last = mha.entries.at(-1);
  assert.equal(last.disqualified, true);
  assert.equal(last.rank, null);
  assert.match(last.dqReason, /1 result disqualified/);
  assert.deepEqual(mha.entries.filter((e) => e.tie).map((e) => e.name), ['tilelang_fa', 'triton_fa_v2']);
  const gemm = index.boards.find((b) => b.key === 'sm90/GEMM/dense/fp8');
  assert.equal(gemm.metric.better, 'higher');
  assert.equal(gemm.entries[0].name, 'tile_256x128');
  assert.ok(gemm.entries[0].speedup > 1);
});

test('disqualification marks a kernel only when none of its results remain', () => {
  assert.equal(disqualification({ disqualified: [] }, null).disqualified, false);
  assert.equal(disqualification({ disqualified: ['abc'] }, { value: 1 }).disqualified, false);
  assert.equal(disqualification({ disqualified: ['abc'] }, { value: 1 }).dqCount, 1);
  assert.equal(disqualification({ disqualified: ['abcdef0123'] }, null).dqReason, '1 result disqualified (abcdef01)');
});

test('queue and runners come through in a stable order', () => {
  const index = normaliseIndex({ ...real, queue: { sm90: { queued: 2, running: 0 }, cpu: { queued: 0, running: 1 } } });
  assert.deepEqual(index.queue.map((q) => q.arch), ['cpu', 'sm90']);
  assert.ok(index.runners.length >= 1);
  assert.ok(index.runners.every((r) => r.id && r.arches.length && r.lastHeartbeatAt));
  const api = [{ runner_id: 'r9', arches: ['sm90'], last_heartbeat: '2026-01-01T00:00:00Z', state: 'idle' }];
  assert.equal(normaliseIndex({ runners: api }).runners[0].id, 'r9');
});

test('scores read index.json, scoreboard and bench-history shapes', () => {
  const fromIndex = normaliseScore({ value: 5, spread: { p10: 4, p90: 6 }, submission: 'u1', submitter: 'ada', at: 't', commit: 'c' });
  assert.deepEqual([fromIndex.p10, fromIndex.p90, fromIndex.submission_id, fromIndex.submitter], [4, 6, 'u1', 'ada']);
  const fromHistory = normaliseScore({ value: 5, submission_id: 'u2', submitter_id: 'grace' });
  assert.deepEqual([fromHistory.submission_id, fromHistory.submitter], ['u2', 'grace']);
  const s = normaliseScore({ value: 100, workloads: [{ name: 'w', stats: { median: 50, p10: 49, p90: 52 } }] });
  assert.equal(s.p10, 98);
  assert.equal(s.p90, 104);
  assert.deepEqual(spreadFromWorkloads([], 1), { p10: null, p90: null });
  assert.equal(normaliseScore(null), null);
});

test('workload params flatten and samples count either way', () => {
  assert.deepEqual(workloadParams({ name: 'r16', params: { rows: 16, cols: 1024 } }), [['rows', '16'], ['cols', '1024']]);
  assert.deepEqual(workloadParams({ name: 'x', shape: [2, 3] }), [['shape', '2×3']]);
  assert.equal(samplesOf({ samples: [1, 2, 3] }), '3');
  assert.equal(samplesOf({ samples: 7 }), '7');
  assert.equal(samplesOf(undefined), '—');
});

test('filters narrow boards and search narrows rows, keeping whole-board ranks', () => {
  const index = normaliseIndex(real);
  assert.deepEqual(filterBoards(index.boards, { arch: 'sm90' }).map((b) => b.key), ['sm90/Norm/RMSNorm/bf16']);
  const found = filterBoards(index.boards, { q: 'ada' });
  assert.deepEqual(found.flatMap((b) => b.entries.map((e) => e.name)), ['numpy_vectorized', 'numpy_inplace']);
  assert.equal(found[0].entries[0].rank, 1);
  const loops = filterBoards(index.boards, { q: 'python_loops' })[0].entries[0];
  assert.equal(loops.rank, 3);
  assert.deepEqual(filterBoards(index.boards, { q: 'no-such-kernel' }), []);
  assert.deepEqual(facets(index.boards).arch, ['cpu', 'sm90']);
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
  const index = normaliseIndex(real);
  const found = locateKernel(index, 'cpu/GEMM/dense/fp32/numpy_ref');
  assert.equal(found.board.key, 'cpu/GEMM/dense/fp32');
  assert.equal(found.entry.rank, 2);
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

/** Every board built at once, as the model did before boards were built on first read. */
function eagerBoards(raw) {
  const groups = new Map();
  for (const k of raw.kernels.map(normaliseKernel)) groups.set(k.group, [...(groups.get(k.group) ?? []), k]);
  return [...groups.keys()].sort().map((key) => {
    const kernels = groups.get(key);
    const metric = (kernels.find((k) => !k.disqualified && k.value !== null) ?? kernels[0]).metric;
    const ref = findReference(kernels, raw.leaderboards?.[key]?.reference ?? null);
    for (const k of kernels) {
      k.speedup = k.disqualified ? null : speedup(k.value, ref?.value ?? null, metric.better);
      k.isReference = ref !== null && k.id === ref.id;
    }
    return { key, metric, referenceId: ref?.id ?? null, entries: rankEntries(kernels, metric.better) };
  });
}

const rows = (board) => board.entries.map((e) => [e.id, e.rank, e.tie, e.tieWith, e.speedup, e.isReference, e.value, e.disqualified, e.submitter]);

test('boards built on first read, in any order, give the rows of building every board at once', () => {
  for (const raw of [real, board, bigIndex(3_000)]) {
    const eager = eagerBoards(raw);
    const index = normaliseIndex(raw);
    assert.deepEqual(index.boards.map((b) => b.key), eager.map((b) => b.key));
    for (const i of [...index.boards.keys()].reverse()) {
      const [lazy, want] = [index.boards[i], eager[i]];
      assert.deepEqual(rows(lazy), rows(want), lazy.key);
      assert.deepEqual([lazy.metric, lazy.referenceId, lazy.count], [want.metric, want.referenceId, want.entries.length]);
    }
  }
});

test('the board list, counts, facets and filters need no board built; a search builds them', () => {
  const index = normaliseIndex(bigIndex(10_000));
  const facetsOf = facets(index.boards);
  const sm90 = filterBoards(index.boards, { arch: 'sm90', quant: 'fp8' });
  assert.equal(index.boards.reduce((n, b) => n + b.count, 0), 10_000);
  assert.equal(index.kernels.size, 10_000);
  assert.deepEqual(facetsOf.quant, ['bf16', 'fp16', 'fp32', 'fp8', 'int4']);
  assert.deepEqual(sm90.map((b) => b.key), ['sm90/Attention/main/fp8', 'sm90/GEMM/main/fp8', 'sm90/MoE/main/fp8', 'sm90/Norm/main/fp8', 'sm90/Quant/main/fp8']);
  assert.equal(index.boards.filter((b) => b.built).length, 0);
  assert.equal(sm90[0].entries.length, sm90[0].count);
  assert.deepEqual(index.boards.filter((b) => b.built).map((b) => b.key), ['sm90/Attention/main/fp8']);
  const found = filterBoards(index.boards, { q: 'k9999 ' });
  assert.deepEqual(found.map((b) => [b.key, b.count, b.entries.map((e) => e.id)]), [['cpu/Quant/main/int4', 1, ['cpu/Quant/main/int4/k9999']]]);
  assert.ok(index.boards.every((b) => b.built));
});

test('buildBoards builds while there is time and resumes where it stopped', () => {
  const index = normaliseIndex(bigIndex(2_000));
  let budget = 5;
  assert.equal(buildBoards(index, () => budget-- > 0), false);
  assert.equal(index.boards.filter((b) => b.built).length, 5);
  assert.equal(buildBoards(index), true);
  assert.ok(index.boards.every((b) => b.built));
});

test('kernels.get finds a kernel on its board, building only that board', () => {
  const index = normaliseIndex(bigIndex(10_000));
  const k = index.kernels.get('gfx942/Attention/main/int4/k1965');
  assert.equal(k, index.boards.find((b) => b.key === 'gfx942/Attention/main/int4').entries.find((e) => e.id === k.id));
  assert.equal(index.boards.filter((b) => b.built).length, 1);
  assert.equal(index.kernels.get('gfx942/Attention/main/int4/nope'), undefined);
  assert.equal(index.kernels.has('x/y/z/w/v'), false);
  assert.equal([...index.kernels].length, 10_000);
  const moved = normaliseIndex({ kernels: [{ id: 'a/b/c/d/k', arch: 'x', metric: {}, best: { value: 1 } }] });
  assert.equal(moved.boards[0].key, 'x/b/c/d');
  assert.equal(moved.kernels.get('a/b/c/d/k').rank, 1, 'an entry whose parts differ from its id is still found');
});

test('kernelChanged names new kernels and changed values, disqualifications and activity', () => {
  const before = bigIndex(50);
  const after = structuredClone(before);
  after.kernels[3].best = { ...after.kernels[3].best, value: 1 };
  after.kernels[4].last_activity_at = '2025-06-01T00:00:00Z';
  after.kernels.push({ ...after.kernels[0], id: 'sm80/Attention/main/fp32/new', name: 'new' });
  const [old, next] = [normaliseIndex(before), normaliseIndex(after)];
  const changed = (id) => kernelChanged(old, next, id);
  assert.deepEqual([3, 4, 5].map((i) => changed(after.kernels[i].id)), [true, true, false]);
  assert.equal(changed('sm80/Attention/main/fp32/new'), true);
  assert.equal(changed('no/such/kernel/at/all'), false);
});
