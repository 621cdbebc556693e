// index.json (the real projection's shape) normalises into boards ranked, scored and referenced
// as the index says, that filter, sort and page; a board is built when first read, with the rows
// of building them all at once.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { buildBoards, disqualification, facets, filterBoards, kernelChanged, locateKernel, normaliseIndex, normaliseKernel, normaliseRunners, pageOf, samplesOf, scoreboardEntry, scoreOf, sortEntries, spreadFromWorkloads, valueEntry, workloadParams } from '../../../webui/js/lib/model.js';

const real = JSON.parse(readFileSync(new URL('./fixtures/index.json', import.meta.url)));
const board = JSON.parse(readFileSync(new URL('./fixtures/board.json', import.meta.url)));

/**
 * A generated index of n kernels over 8 archs x 5 op classes x 5 quants, index.json-shaped: each
 * board's first kernel is its reference, scores are its value over each kernel's, ranked.
 */
export function bigIndex(n) {
  const archs = ['sm80', 'sm89', 'sm90', 'sm100', 'gfx90a', 'gfx942', 'gfx950', 'cpu'];
  const ops = ['Attention', 'GEMM', 'Norm', 'MoE', 'Quant'];
  const quants = ['fp32', 'bf16', 'fp16', 'fp8', 'int4'];
  const kernels = [];
  const boards = {};
  for (let i = 0; i < n; i += 1) {
    const [arch, op, quant] = [archs[i % 8], ops[Math.floor(i / 8) % 5], quants[Math.floor(i / 40) % 5]];
    const key = `${arch}/${op}/main/${quant}`;
    const id = `${key}/k${i}`;
    const value = 100 + ((i * 7919) % 1000) / 10;
    const dq = i % 501 === 0 && i > 0;
    const entry = { value, spread: { p10: value * 0.99, p90: value * 1.01 }, submitter: `s${i % 17}`, submission: `sub${i}`, at: '2025-05-01T00:00:00Z', commit: null, device: 'gpu0' };
    boards[key] ??= { board: key, reviewed: true, kernels: [], reference: { kernel_id: id, commit: null }, refValue: value };
    boards[key].kernels.push(id);
    const speedup = boards[key].refValue / value;
    const score = dq ? null : { speedup, interval: [speedup * 0.995, speedup * 1.005], basis: 'side_by_side' };
    kernels.push({
      id, arch, op_class: op, sub_class: 'main', quant, name: `k${i}`,
      title: `kernel ${i}`, language: i % 3 ? 'cuda' : 'triton', metric: { name: 'latency', unit: 'us', better: 'lower' },
      best: dq ? null : entry, current: dq ? null : entry, score, accepted_count: dq ? 0 : 1 + (i % 5),
      last_activity_at: '2025-05-01T00:00:00Z', disqualified: dq ? [`sub${i}`] : [], history: [],
    });
  }
  const leaderboards = {};
  for (const [key, info] of Object.entries(boards)) {
    const scored = kernels.filter((k) => k.score && info.kernels.includes(k.id)).sort((a, b) => b.score.speedup - a.score.speedup || (a.id < b.id ? -1 : 1));
    leaderboards[key] = scored.map((k, i) => ({ kernel_id: k.id, rank: i + 1, value: k.best.value, score: k.score }));
    delete info.refValue;
  }
  return { schema_version: 1, log_seq: n, kernels, leaderboards, unreviewed_leaderboards: {}, boards, queue: {}, runners: [] };
}

test('a real index becomes one board per arch/op_class/sub_class/quant, ranked and scored as it says', () => {
  const index = normaliseIndex(real);
  assert.equal(index.logSeq, real.log_seq);
  assert.equal(index.kernels.size, real.kernels.length);
  assert.deepEqual(index.boards.map((b) => b.key), ['cpu/GEMM/dense/fp32', 'cpu/Norm/RMSNorm/fp32', 'cpu/Softmax/row/fp32', 'sm90/Norm/RMSNorm/bf16']);
  for (const [key, ranked] of Object.entries(real.leaderboards)) {
    const b = index.boards.find((x) => x.key === key);
    assert.deepEqual(b.entries.slice(0, ranked.length).map((e) => [e.id, e.rank, e.tied]), ranked.map((r) => [r.kernel_id, r.rank, r.tied === true]), `${key} ranks as the projection does`);
    assert.equal(b.referenceId, real.boards[key].reference.kernel_id);
    assert.equal(b.referenceCommit, real.boards[key].reference.commit);
    for (const e of b.entries) assert.equal(e.speedup, real.kernels.find((k) => k.id === e.id).score?.speedup ?? null);
    assert.deepEqual(b.entries.filter((e) => e.isReference).map((e) => e.id), [b.referenceId]);
  }
  const norm = index.boards.find((b) => b.key === 'cpu/Norm/RMSNorm/fp32');
  const top = norm.entries[0];
  assert.equal(top.submitter, 'ada');
  assert.match(top.best.submission, /^[0-9a-f-]{36}$/);
  assert.match(top.best.commit, /^[0-9a-f]{40}$/);
  assert.equal(top.device, 'stub');
  assert.equal(norm.entries.find((e) => e.isReference).score.basis, 'reference');
  assert.ok(index.boards.every((b) => b.entries.every((e) => !e.disqualified)), 'an empty disqualified list marks nothing');
  const unscored = index.boards.find((b) => b.key === 'sm90/Norm/RMSNorm/bf16').entries[0];
  assert.equal(unscored.value, null);
  assert.equal(unscored.rank, null);
  assert.equal(unscored.score, null);
});

test("the board is the index's: its order, ranks, ties, scores and reference, never guessed", () => {
  const metric = { name: 'latency', unit: 'us', better: 'lower' };
  const kernel = (name, value, score) => ({ id: `cpu/A/x/fp32/${name}`, arch: 'cpu', op_class: 'A', sub_class: 'x', quant: 'fp32', name, metric, best: { value, submission: name }, score, disqualified: [] });
  const sbs = (speedup, low, high) => ({ speedup, interval: [low, high], basis: 'side_by_side' });
  const pinned = { speedup: 1, interval: [1, 1], basis: 'reference' };
  const estimate = { speedup: 0.5, interval: null, basis: 'absolute' };
  const raw = {
    kernels: [kernel('first', 100, pinned), kernel('slow_but_scored', 90, sbs(1.4, 1.3, 1.5)), kernel('fast_alone', 50, sbs(1.35, 1.2, 1.45)), kernel('numpy_ref', 200, estimate)],
    leaderboards: {
      'cpu/A/x/fp32': [
        { kernel_id: 'cpu/A/x/fp32/slow_but_scored', rank: 1, value: 90, score: sbs(1.4, 1.3, 1.5) },
        { kernel_id: 'cpu/A/x/fp32/fast_alone', rank: 1, value: 50, score: sbs(1.35, 1.2, 1.45), tied: true },
        { kernel_id: 'cpu/A/x/fp32/first', rank: 3, value: 100, score: pinned },
        { kernel_id: 'cpu/A/x/fp32/numpy_ref', rank: 4, value: 200, score: estimate },
      ],
    },
    boards: { 'cpu/A/x/fp32': { board: 'cpu/A/x/fp32', reviewed: true, kernels: [], reference: { kernel_id: 'cpu/A/x/fp32/first', commit: 'c'.repeat(40) } } },
  };
  const [only] = normaliseIndex(raw).boards;
  assert.deepEqual(only.entries.map((e) => [e.name, e.rank]), [['slow_but_scored', 1], ['fast_alone', 1], ['first', 3], ['numpy_ref', 4]], 'by score, not by value');
  assert.deepEqual(only.entries.map((e) => e.tied), [false, true, false, false]);
  assert.deepEqual(only.entries.map((e) => e.tie), [true, true, false, false], 'both share the rank');
  assert.deepEqual(only.entries[1].tieWith, ['cpu/A/x/fp32/slow_but_scored']);
  assert.deepEqual(only.entries.map((e) => e.speedup), [1.4, 1.35, 1, 0.5]);
  assert.deepEqual(only.entries[0].score, { speedup: 1.4, low: 1.3, high: 1.5, basis: 'side_by_side' });
  assert.deepEqual(only.entries[3].score, { speedup: 0.5, low: null, high: null, basis: 'absolute' });
  assert.equal(only.referenceId, 'cpu/A/x/fp32/first');
  assert.equal(only.referenceCommit, 'c'.repeat(40));
  assert.deepEqual(only.entries.filter((e) => e.isReference).map((e) => e.name), ['first'], 'a *_ref name is no reference');
});

test('ties between settled intervals, the reference, an unranked estimate and a disqualified kernel on a projected board', () => {
  const index = normaliseIndex(board);
  const mha = index.boards.find((b) => b.key === 'sm90/Attention/MHA/fp16');
  assert.deepEqual(mha.entries.map((e) => [e.name, e.rank]), [['flash_v3', 1], ['tilelang_fa', 2], ['triton_fa_v2', 2], ['torch_sdpa_ref', 4], ['naive_fa', null], ['cutlass_fmha', null]]);
  assert.equal(mha.entries[4].unranked, 'no interval: an estimate from figures measured apart');
  assert.equal(mha.referenceId, 'sm90/Attention/MHA/fp16/torch_sdpa_ref');
  assert.deepEqual(mha.entries.map((e) => e.score?.basis ?? null), ['side_by_side', 'side_by_side', 'side_by_side', 'reference', 'absolute', null]);
  const last = mha.entries.at(-1);
  assert.equal(last.disqualified, true);
  assert.match(last.dqReason, /1 result disqualified/);
  assert.deepEqual(mha.entries.filter((e) => e.tie).map((e) => e.name), ['tilelang_fa', 'triton_fa_v2']);
  assert.deepEqual(mha.entries.filter((e) => e.tied).map((e) => e.name), ['triton_fa_v2']);
  const gemm = index.boards.find((b) => b.key === 'sm90/GEMM/dense/fp8');
  assert.equal(gemm.metric.better, 'higher');
  assert.deepEqual(gemm.entries.map((e) => [e.name, e.rank]), [['cublaslt_ref', 1], ['tile_256x128', null]]);
  assert.ok(gemm.entries[1].speedup > 1, 'an estimate is shown, though it ranks nothing');
});

test('disqualification marks a kernel only when none of its results remain', () => {
  assert.equal(disqualification({ disqualified: [] }, null).disqualified, false);
  assert.equal(disqualification({ disqualified: ['abc'] }, { value: 1 }).disqualified, false);
  assert.equal(disqualification({ disqualified: ['abc'] }, { value: 1 }).dqCount, 1);
  assert.equal(disqualification({ disqualified: ['abcdef0123'] }, null).dqReason, '1 result disqualified (abcdef01)');
});

test('the queue comes in a stable order; liveness comes from /api/runners, not the index', () => {
  const index = normaliseIndex({ ...real, queue: { sm90: { queued: 2, running: 0 }, cpu: { queued: 0, running: 1 } } });
  assert.deepEqual(index.queue.map((q) => q.arch), ['cpu', 'sm90']);
  assert.ok(index.runners.length >= 1);
  assert.ok(index.runners.every((r) => r.id && r.registered_at && ['registered', 'deregistered'].includes(r.state)));
  assert.ok(index.runners.every((r) => !('lastHeartbeatAt' in r) && !('last_heartbeat' in r)), 'the index knows no heartbeat');
  const api = [{ runner_id: 'r9', arches: ['sm90'], last_heartbeat: '2026-01-01T00:00:00Z', state: 'gone' }];
  assert.deepEqual(normaliseRunners(api).map((r) => [r.id, r.lastHeartbeatAt, r.state]), [['r9', '2026-01-01T00:00:00Z', 'gone']]);
});

test('value entries, scoreboard entries and scores each read their one shape', () => {
  const entry = valueEntry({ value: 5, spread: { p10: 4, p90: 6 }, submission: 'u1', submitter: 'ada', at: 't', commit: 'c', device: 'H100', score: { speedup: 2, interval: [1.8, 2.2], basis: 'side_by_side' } });
  assert.deepEqual([entry.p10, entry.p90, entry.submission, entry.submitter, entry.device], [4, 6, 'u1', 'ada', 'H100']);
  assert.deepEqual(entry.score, { speedup: 2, low: 1.8, high: 2.2, basis: 'side_by_side' });
  assert.equal(valueEntry({ metric: { value: 5 } }), null, 'a result document is not a value entry');
  assert.equal(valueEntry(5), null);
  const s = scoreboardEntry({ value: 100, submission_id: 'u2', submitter: 'grace', workloads: [{ name: 'w', stats: { median: 50, p10: 49, p90: 52 } }] });
  assert.deepEqual([s.p10, s.p90, s.submission_id], [98, 104, 'u2']);
  assert.deepEqual(spreadFromWorkloads([], 1), { p10: null, p90: null });
  assert.equal(scoreboardEntry(null), null);
  assert.equal(scoreOf({ speedup: 1, interval: null, basis: 'absolute' }).low, null);
  assert.equal(scoreOf(null), null);
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
  assert.equal(found.entry.rank, real.leaderboards['cpu/GEMM/dense/fp32'].find((r) => r.kernel_id === found.kernel.id).rank);
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

/** Every board built at once, read straight off the index: its ranked kernels, then the rest (disqualified last). */
function eagerBoards(raw) {
  const keys = [...new Set(raw.kernels.map((k) => `${k.arch}/${k.op_class}/${k.sub_class}/${k.quant}`))].sort();
  return keys.map((key) => {
    const ranking = raw.leaderboards[key] ?? raw.unreviewed_leaderboards?.[key] ?? [];
    const mine = raw.kernels.filter((k) => k.id.startsWith(`${key}/`));
    const dq = (k) => Number(k.disqualified.length > 0 && !k.best);
    const rest = mine.filter((k) => !ranking.some((r) => r.kernel_id === k.id)).sort((a, b) => dq(a) - dq(b) || (a.id < b.id ? -1 : 1));
    return { key, ids: [...ranking.map((r) => r.kernel_id), ...rest.map((k) => k.id)], ranks: [...ranking.map((r) => r.rank), ...rest.map(() => null)], count: mine.length };
  });
}

test('boards built on first read, in any order, give the rows of building every board at once', () => {
  for (const raw of [real, board, bigIndex(3_000)]) {
    const eager = eagerBoards(raw);
    const index = normaliseIndex(raw);
    assert.deepEqual(index.boards.map((b) => b.key), eager.map((b) => b.key));
    for (const i of [...index.boards.keys()].reverse()) {
      const [lazy, want] = [index.boards[i], eager[i]];
      assert.deepEqual(lazy.entries.map((e) => e.id), want.ids, lazy.key);
      assert.deepEqual(lazy.entries.map((e) => e.rank), want.ranks, lazy.key);
      assert.equal(lazy.count, want.count);
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

const confirmations = JSON.parse(readFileSync(new URL('./fixtures/confirmations.json', import.meta.url)));
const NORM = 'sm90/Norm/RMSNorm/fp16';

test('a record run again carries its mark on the board: awaiting, confirmed or disputed (unranked, last)', async () => {
  const index = normaliseIndex(confirmations);
  const [b] = index.boards;
  assert.equal(b.key, NORM);
  assert.deepEqual(b.entries.map((e) => [e.name, e.rank, e.confirmation]), [
    ['fast', 1, 'unconfirmed'],
    ['rmsnorm_ref', 2, null],
    ['lucky', null, 'disputed'],
  ]);
  assert.equal(b.entries[2].unranked, 'disputed: a second run did not agree with it');
  assert.deepEqual(b.entries.map((e) => e.confirmation), confirmations.leaderboards[NORM].map((r) => r.confirmation ?? null), 'as the leaderboard says');
  const fast = index.kernels.get(`${NORM}/fast`);
  assert.equal(fast.current.confirmation, 'unconfirmed');
  assert.equal(fast.best.confirmation, 'unconfirmed');
  assert.equal(valueEntry({ value: 1 }).confirmation, null);
  const later = normaliseIndex({ ...confirmations, leaderboards: { [NORM]: confirmations.leaderboards[NORM].map((r) => (r.confirmation === 'unconfirmed' ? { ...r, confirmation: 'confirmed' } : r)) } });
  assert.equal(kernelChanged(index, later, `${NORM}/fast`), true, 'a mark that changes flashes the row');
  assert.equal(kernelChanged(index, later, `${NORM}/lucky`), false);
});

test("knownResults gives each of a kernel's results once, with its score, spread and mark", async () => {
  const { knownResults } = await import('../../../webui/js/lib/model.js');
  const fast = normaliseIndex(confirmations).kernels.get(`${NORM}/fast`);
  const known = knownResults(fast);
  assert.deepEqual(known.map((k) => [k.value, k.confirmation, k.score.speedup, k.score.low, k.score.high]), [
    [600, 'confirmed', 1.5, 1.45, 1.55],
    [450, 'unconfirmed', 2.0, 1.96, 2.04],
  ]);
  assert.ok(known.every((k) => k.p10 < k.value && k.p90 > k.value));
  assert.equal(known[1].submitter, 'ada', 'the history row merged with the current entry');
  assert.deepEqual(knownResults(null), []);
});

test('a kernel whose newest result is held back shows the result that stands, and why', () => {
  const raw = {
    id: 'cpu/Norm/RMSNorm/fp32/k', arch: 'cpu', op_class: 'Norm', sub_class: 'RMSNorm', quant: 'fp32', name: 'k',
    metric: { name: 'latency', unit: 'us', better: 'lower' },
    best: { value: 40, submission: 's2', suspect: true }, current: { value: 40, submission: 's2', suspect: true },
    score: { speedup: 2.5, interval: [2.45, 2.55], basis: 'side_by_side' },
  };
  const ranked = {
    kernel_id: raw.id, rank: 2, value: 80, submission: 's1', suspect: true,
    score: { speedup: 1.25, interval: [1.22, 1.28], basis: 'side_by_side' },
    held_back: { submission: 's2', reason: 'suspect: held back until a maintainer clears it' },
  };
  const k = normaliseKernel(raw, ranked);
  assert.deepEqual([k.rank, k.value, k.speedup, k.suspect], [2, 80, 1.25, true]);
  assert.equal(k.heldBack.submission, 's2');
  assert.equal(k.unranked, null);
});
