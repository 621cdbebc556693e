// Pure read model: normalise index.json into boards, then filter, sort and page them.

import { findReference, rankEntries, speedup } from './rank.js';
import { parseTime } from './format.js';

function num(x) {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

function geomean(xs) {
  const ok = xs.filter((x) => Number.isFinite(x) && x > 0);
  if (ok.length === 0) return null;
  return Math.exp(ok.reduce((s, x) => s + Math.log(x), 0) / ok.length);
}

/** p10/p90 for a headline value from its workloads' stats, as ratios to each median. */
export function spreadFromWorkloads(workloads, value) {
  if (!Array.isArray(workloads) || !Number.isFinite(value)) return { p10: null, p90: null };
  const rows = workloads.map((w) => w?.stats).filter((s) => s && num(s.p10) !== null && num(s.p90) !== null);
  const mid = (s) => num(s.median) ?? num(s.mean);
  const r10 = geomean(rows.map((s) => s.p10 / mid(s)));
  const r90 = geomean(rows.map((s) => s.p90 / mid(s)));
  if (r10 === null || r90 === null) return { p10: null, p90: null };
  return { p10: value * r10, p90: value * r90 };
}

/**
 * A score into {value, p10, p90, submitter, at, submission_id, commit, ...}. Reads index.json's
 * `{value, at, commit, spread: {p10, p90}, submission, submitter}`, the scoreboard's
 * `{value, workloads, submission_id, submitter, runner_id, at, commit}` (spread derived from
 * the workloads' stats) and bench-history rows (`submitter_id`).
 */
export function normaliseScore(raw) {
  if (raw === null || raw === undefined) return null;
  if (typeof raw === 'number') return { value: raw, p10: null, p90: null };
  const value = num(raw.value) ?? num(raw.metric?.value);
  if (value === null) return null;
  const spread = raw.spread ?? {};
  let p10 = num(spread.p10) ?? num(raw.p10);
  let p90 = num(spread.p90) ?? num(raw.p90);
  if (p10 === null || p90 === null) ({ p10, p90 } = spreadFromWorkloads(raw.workloads, value));
  return {
    value,
    p10,
    p90,
    submitter: raw.submitter ?? raw.submitter_id ?? null,
    at: raw.at ?? null,
    submission_id: raw.submission_id ?? raw.submission ?? null,
    commit: raw.commit ?? null,
    runner_id: raw.runner_id ?? null,
    workloads: raw.workloads ?? null,
    correctness: raw.correctness ?? null,
    environment: raw.environment ?? null,
  };
}

/**
 * index.json lists a kernel's disqualified submissions (`disqualified: [uuid]`); their values
 * are out of `best`. A kernel whose every result is disqualified stays on its board, marked.
 */
export function disqualification(raw, best) {
  const dq = raw.disqualified;
  if (Array.isArray(dq)) {
    const n = dq.length;
    if (n === 0 || best) return { disqualified: false, dqReason: null, dqCount: n };
    const ids = dq.map((s) => String(s).slice(0, 8)).join(', ');
    return { disqualified: true, dqReason: `${n} result${n === 1 ? '' : 's'} disqualified (${ids})`, dqCount: n };
  }
  if (!dq) return { disqualified: false, dqReason: null, dqCount: 0 };
  return { disqualified: true, dqReason: typeof dq === 'object' ? dq.reason ?? null : null, dqCount: 1 };
}

/** One index.json kernel entry into the flat shape the views use. */
export function normaliseKernel(raw) {
  const id = String(raw.id ?? raw.kernel_id);
  const split = id.split('/');
  const arch = raw.arch ?? split[0];
  const op_class = raw.op_class ?? split[1];
  const sub_class = raw.sub_class ?? split[2];
  const quant = raw.quant ?? split[3];
  const metric = raw.metric ?? {};
  const best = normaliseScore(raw.best);
  const current = normaliseScore(raw.current);
  const dq = disqualification(raw, best);
  return {
    id,
    arch,
    op_class,
    sub_class,
    quant,
    name: raw.name ?? split[4],
    group: `${arch}/${op_class}/${sub_class}/${quant}`,
    title: raw.title ?? '',
    language: raw.language ?? '',
    tags: raw.tags ?? [],
    reference: raw.reference === true || raw.is_reference === true,
    metric: { name: metric.name ?? 'value', unit: metric.unit ?? '', better: metric.better === 'higher' ? 'higher' : 'lower' },
    best,
    current,
    value: best ? best.value : null,
    p10: best ? best.p10 : null,
    p90: best ? best.p90 : null,
    submitter: best?.submitter ?? current?.submitter ?? raw.submitter ?? null,
    acceptedCount: raw.accepted_count ?? 0,
    lastActivityAt: raw.last_activity_at ?? current?.at ?? best?.at ?? null,
    history: raw.history ?? [],
    disqualified: dq.disqualified,
    dqReason: dq.dqReason,
    dqCount: dq.dqCount,
    speedup: null,
    isReference: false,
    rank: null,
    tie: false,
    tieWith: null,
  };
}

function boardIds(value) {
  if (Array.isArray(value)) return value.map((v) => (typeof v === 'string' ? v : v.id ?? v.kernel_id));
  const list = value?.kernel_ids ?? value?.kernels ?? value?.ranking ?? value?.entries ?? [];
  return boardIds(list);
}

/** The index's leaderboards (object or list form) as {group: {ids, reference}}. */
export function leaderboardHints(raw) {
  const hints = {};
  const add = (key, value) => {
    hints[key] = { ids: boardIds(value), reference: value?.reference ?? value?.reference_id ?? null };
  };
  if (Array.isArray(raw)) {
    for (const item of raw) {
      const key = item.key ?? item.group ?? item.board ?? ['arch', 'op_class', 'sub_class', 'quant'].map((p) => item[p]).join('/');
      add(key, item);
    }
  } else if (raw && typeof raw === 'object') {
    for (const [key, value] of Object.entries(raw)) add(key, value);
  }
  return hints;
}

function buildBoard(key, kernels, hint) {
  const [arch, op_class, sub_class, quant] = key.split('/');
  const live = kernels.find((k) => !k.disqualified && k.value !== null) ?? kernels[0];
  const metric = live.metric;
  const ref = findReference(kernels, hint?.reference);
  const refValue = ref?.value ?? null;
  for (const k of kernels) {
    k.speedup = k.disqualified ? null : speedup(k.value, refValue, metric.better);
    k.isReference = ref !== null && k.id === ref.id;
  }
  return {
    key,
    arch,
    op_class,
    sub_class,
    quant,
    metric,
    referenceId: ref?.id ?? null,
    entries: rankEntries(kernels, metric.better),
  };
}

function listKernels(raw) {
  if (Array.isArray(raw)) return raw;
  if (raw && typeof raw === 'object') return Object.entries(raw).map(([id, k]) => ({ id, ...k }));
  return [];
}

/** Runner entries (list or {id: runner}) with id, arches and lastHeartbeatAt. */
export function normaliseRunners(raw) {
  return listKernels(raw).map((r) => ({
    ...r,
    id: r.id ?? r.runner_id,
    arches: r.arches ?? r.archs ?? (r.arch ? [r.arch] : []),
    lastHeartbeatAt: r.last_heartbeat_at ?? r.last_heartbeat ?? r.heartbeat_at ?? null,
  }));
}

function listQueue(raw) {
  const rows = Array.isArray(raw) ? raw : Object.entries(raw ?? {}).map(([arch, q]) => ({ arch, ...q }));
  return rows
    .map((q) => ({ arch: q.arch, queued: q.queued ?? 0, running: q.running ?? 0 }))
    .sort((a, b) => (a.arch < b.arch ? -1 : 1));
}

/** Normalise a whole index.json document. */
export function normaliseIndex(raw) {
  const kernels = listKernels(raw?.kernels).map(normaliseKernel);
  const byId = new Map(kernels.map((k) => [k.id, k]));
  const hints = leaderboardHints(raw?.leaderboards);
  const groups = new Map();
  for (const k of kernels) {
    if (!groups.has(k.group)) groups.set(k.group, []);
    groups.get(k.group).push(k);
  }
  const boards = [...groups.keys()].sort().map((key) => buildBoard(key, groups.get(key), hints[key]));
  return {
    schemaVersion: raw?.schema_version ?? null,
    logSeq: raw?.log_seq ?? 0,
    headCommit: raw?.head_commit ?? null,
    generatedAt: raw?.generated_at ?? null,
    kernels: byId,
    boards,
    queue: listQueue(raw?.queue),
    runners: normaliseRunners(raw?.runners),
  };
}

/** Distinct archs, op classes and quants across boards, sorted, for the filter menus. */
export function facets(boards) {
  const pick = (field) => [...new Set(boards.map((b) => b[field]))].sort();
  return { arch: pick('arch'), op_class: pick('op_class'), sub_class: pick('sub_class'), quant: pick('quant') };
}

/** True when a kernel entry matches a free-text query (id, title, submitter, language). */
export function matchesQuery(entry, q) {
  if (!q) return true;
  const hay = `${entry.id} ${entry.title} ${entry.submitter ?? ''} ${entry.language}`.toLowerCase();
  return q
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean)
    .every((word) => hay.includes(word));
}

/** Boards restricted to the filters; ranks stay those of the whole board. */
export function filterBoards(boards, filters = {}) {
  const out = [];
  for (const board of boards) {
    if (['arch', 'op_class', 'sub_class', 'quant'].some((f) => filters[f] && board[f] !== filters[f])) continue;
    const entries = filters.q ? board.entries.filter((e) => matchesQuery(e, filters.q)) : board.entries;
    if (entries.length === 0 && filters.q) continue;
    out.push(entries === board.entries ? board : { ...board, entries });
  }
  return out;
}

const SORT_KEYS = {
  rank: (e) => (e.rank === null ? null : e.rank),
  name: (e) => e.name.toLowerCase(),
  value: (e) => e.value,
  spread: (e) => (e.p10 === null || e.p90 === null || !e.value ? null : Math.abs(e.p90 - e.p10) / e.value),
  speedup: (e) => e.speedup,
  submitter: (e) => (e.submitter ?? '').toLowerCase() || null,
  changed: (e) => parseTime(e.lastActivityAt),
  accepted: (e) => e.acceptedCount,
  language: (e) => e.language || null,
};

export const SORTABLE = Object.keys(SORT_KEYS);

/** Entries sorted by a column; missing values last in either direction; stable by rank. */
export function sortEntries(entries, key = 'rank', dir = 'asc') {
  const get = SORT_KEYS[key] ?? SORT_KEYS.rank;
  const sign = dir === 'desc' ? -1 : 1;
  return entries
    .map((e, i) => ({ e, i, v: get(e) }))
    .sort((a, b) => {
      if (a.v === null && b.v === null) return a.i - b.i;
      if (a.v === null) return 1;
      if (b.v === null) return -1;
      if (a.v < b.v) return -sign;
      if (a.v > b.v) return sign;
      return a.i - b.i;
    })
    .map((x) => x.e);
}

/** One page (1-based) of a list: {items, page, pages, total, start}. */
export function pageOf(items, page = 1, size = 50) {
  const total = items.length;
  const pages = Math.max(1, Math.ceil(total / size));
  const current = Math.min(Math.max(1, Math.floor(Number(page)) || 1), pages);
  const start = (current - 1) * size;
  return { items: items.slice(start, start + size), page: current, pages, total, start };
}

/** The board and ranked entry of one kernel, or null. */
export function locateKernel(index, id) {
  const kernel = index.kernels.get(id);
  if (!kernel) return null;
  const board = index.boards.find((b) => b.key === kernel.group);
  const entry = board?.entries.find((e) => e.id === id) ?? null;
  return { kernel, board, entry };
}

/** A desc.yaml workload's parameters as [key, text] pairs (`params` flattened, arrays as a×b). */
export function workloadParams(w) {
  const own = Object.entries(w ?? {}).filter(([k]) => !['name', 'description', 'params'].includes(k));
  const params = w?.params && typeof w.params === 'object' ? Object.entries(w.params) : [];
  return [...params, ...own].map(([k, v]) => [k, Array.isArray(v) ? v.join('×') : v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v)]);
}

/** How many samples a stats block holds: result documents list them, scoreboards count them. */
export function samplesOf(stats) {
  const s = stats?.samples;
  if (Array.isArray(s)) return String(s.length);
  return Number.isFinite(s) ? String(s) : '—';
}
