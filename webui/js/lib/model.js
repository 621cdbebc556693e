// Pure read model: normalise index.json into boards, then filter, sort and page them. A board
// is built (its kernels normalised and ranked) the first time its entries are read, so a page
// of boards costs that page, not the whole index.

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

/** A raw kernel entry's id, its five parts and its board key (arch/op_class/sub_class/quant). */
function kernelParts(raw) {
  const id = String(raw.id ?? raw.kernel_id);
  const split = id.split('/');
  const arch = raw.arch ?? split[0];
  const op_class = raw.op_class ?? split[1];
  const sub_class = raw.sub_class ?? split[2];
  const quant = raw.quant ?? split[3];
  return { id, arch, op_class, sub_class, quant, name: raw.name ?? split[4], group: `${arch}/${op_class}/${sub_class}/${quant}` };
}

function given(x) {
  return x !== null && x !== undefined;
}

/** kernelParts(raw).group without splitting the id when the entry names its parts (as projected). */
function boardKey(raw) {
  const { arch, op_class, sub_class, quant } = raw;
  if (given(arch) && given(op_class) && given(sub_class) && given(quant)) return `${arch}/${op_class}/${sub_class}/${quant}`;
  return kernelParts(raw).group;
}

/** One index.json kernel entry into the flat shape the views use. */
export function normaliseKernel(raw) {
  const { id, arch, op_class, sub_class, quant, name, group } = kernelParts(raw);
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
    name,
    group,
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
    // A best marked suspect (a tripwire hit or a runtime flag no maintainer has cleared yet):
    // still shown and ranked, but marked.
    suspect: raw.best?.suspect === true,
    // Indexes from before boards were reviewed have no such field: their boards count as reviewed.
    boardReviewed: raw.board_reviewed !== false,
    speedup: null,
    isReference: false,
    rank: null,
    tie: false,
    tieWith: null,
  };
}

/** The reference kernel each leaderboard of the index names (object or list form), as {group: id}. */
export function leaderboardReferences(raw) {
  const refs = {};
  const add = (key, value) => {
    refs[key] = value?.reference ?? value?.reference_id ?? null;
  };
  if (Array.isArray(raw)) {
    for (const item of raw) {
      const key = item.key ?? item.group ?? item.board ?? ['arch', 'op_class', 'sub_class', 'quant'].map((p) => item[p]).join('/');
      add(key, item);
    }
  } else if (raw && typeof raw === 'object') {
    for (const [key, value] of Object.entries(raw)) add(key, value);
  }
  return refs;
}

function buildBoard(kernels, referenceId) {
  const live = kernels.find((k) => !k.disqualified && k.value !== null) ?? kernels[0];
  const metric = live.metric;
  const ref = findReference(kernels, referenceId);
  const refValue = ref?.value ?? null;
  for (const k of kernels) {
    k.speedup = k.disqualified ? null : speedup(k.value, refValue, metric.better);
    k.isReference = ref !== null && k.id === ref.id;
  }
  return { metric, referenceId: ref?.id ?? null, entries: rankEntries(kernels, metric.better) };
}

/**
 * A board of raw kernel entries. `count` and the key's parts are there at once; `metric`,
 * `referenceId` and the ranked `entries` are built on first read (or by `build()`), once.
 */
function lazyBoard(key, raws, referenceId, info) {
  const [arch, op_class, sub_class, quant] = key.split('/');
  let built = null;
  const build = () => (built ??= buildBoard(raws.map(normaliseKernel), referenceId));
  return {
    key,
    arch,
    op_class,
    sub_class,
    quant,
    count: raws.length,
    reviewed: boardReviewed(info, raws),
    reviewedBy: info?.reviewed_by ?? null,
    judgeKernel: info?.judge_kernel ?? null,
    get built() {
      return built !== null;
    },
    build,
    get metric() {
      return build().metric;
    },
    get referenceId() {
      return build().referenceId;
    },
    get entries() {
      return build().entries;
    },
  };
}

/**
 * Whether a board is reviewed: the index's `boards` entry says so; without one, its kernels'
 * `board_reviewed` (an index from before boards were reviewed has neither: reviewed).
 */
export function boardReviewed(info, raws = []) {
  if (info && typeof info.reviewed === 'boolean') return info.reviewed;
  return !raws.some((k) => k.board_reviewed === false);
}

/** Board keys in display order: reviewed boards first, unreviewed ones listed apart after them. */
export function orderBoards(keys, reviewedOf) {
  return [...keys].sort((a, b) => Number(!reviewedOf(a)) - Number(!reviewedOf(b)) || (a < b ? -1 : a > b ? 1 : 0));
}

/** id -> board key, for the ids whose board the id's own prefix does not name. */
function boardKeysById(groups) {
  const keys = new Map();
  for (const [key, raws] of groups) for (const raw of raws) keys.set(kernelParts(raw).id, key);
  return keys;
}

/**
 * id -> normalised kernel, read like a Map; a lookup builds only that kernel's board. The id's
 * prefix names its board in every projected index; the full id -> board map is built only
 * when it does not.
 */
function kernelLookup(boards, groups) {
  const byKey = new Map(boards.map((b) => [b.key, b]));
  let keyOf = null;
  const find = (key, id) => byKey.get(key)?.entries.find((e) => e.id === id);
  const get = (id) => {
    const own = find(id.slice(0, id.lastIndexOf('/')), id);
    if (own) return own;
    keyOf ??= boardKeysById(groups);
    return find(keyOf.get(id), id);
  };
  return {
    size: boards.reduce((n, b) => n + b.count, 0),
    get,
    has: (id) => get(id) !== undefined,
    *[Symbol.iterator]() {
      for (const board of boards) for (const e of board.entries) yield [e.id, e];
    },
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

/**
 * Normalise a whole index.json document. One pass groups the raw kernels by board; each board
 * normalises and ranks its kernels when first read (see `lazyBoard`), `buildBoards` builds the
 * rest ahead of need. The rankings are those of building every board at once.
 */
export function normaliseIndex(raw) {
  const referencesReviewed = leaderboardReferences(raw?.leaderboards);
  const groups = new Map();
  for (const k of listKernels(raw?.kernels)) {
    const key = boardKey(k);
    const members = groups.get(key);
    if (members) members.push(k);
    else groups.set(key, [k]);
  }
  const infos = raw?.boards && typeof raw.boards === 'object' ? raw.boards : {};
  const references = { ...leaderboardReferences(raw?.unreviewed_leaderboards), ...referencesReviewed };
  const order = orderBoards(groups.keys(), (key) => boardReviewed(infos[key], groups.get(key)));
  const boards = order.map((key) => lazyBoard(key, groups.get(key), references[key], infos[key]));
  return {
    schemaVersion: raw?.schema_version ?? null,
    logSeq: raw?.log_seq ?? 0,
    headCommit: raw?.head_commit ?? null,
    generatedAt: raw?.generated_at ?? null,
    kernels: kernelLookup(boards, groups),
    boards,
    queue: listQueue(raw?.queue),
    runners: normaliseRunners(raw?.runners),
  };
}

/** Build the boards not built yet while `more()` says there is time; true once all are built. */
export function buildBoards(index, more = () => true) {
  for (const board of index.boards) {
    if (board.built) continue;
    if (!more()) return false;
    board.build();
  }
  return true;
}

/** True when kernel `id` is new in `index` or its value, disqualification or activity changed. */
export function kernelChanged(previous, index, id) {
  const k = index.kernels.get(id);
  if (!k) return false;
  const old = previous.kernels.get(id);
  return !old || old.value !== k.value || old.disqualified !== k.disqualified || old.lastActivityAt !== k.lastActivityAt;
}

/** Distinct archs, op classes and quants across boards, sorted, for the filter menus. */
export function facets(boards) {
  const pick = (field) => [...new Set(boards.map((b) => b[field]))].sort();
  return { arch: pick('arch'), op_class: pick('op_class'), sub_class: pick('sub_class'), quant: pick('quant') };
}

const haystacks = new WeakMap();

function haystack(entry) {
  let hay = haystacks.get(entry);
  if (hay === undefined) {
    hay = `${entry.id} ${entry.title} ${entry.submitter ?? ''} ${entry.language}`.toLowerCase();
    haystacks.set(entry, hay);
  }
  return hay;
}

function queryWords(q) {
  return q.toLowerCase().split(/\s+/).filter(Boolean);
}

/** True when a kernel entry matches a free-text query (id, title, submitter, language). */
export function matchesQuery(entry, q) {
  if (!q) return true;
  const hay = haystack(entry);
  return queryWords(q).every((word) => hay.includes(word));
}

/** Boards restricted to the filters; ranks stay those of the whole board. Only a search reads entries. */
export function filterBoards(boards, filters = {}) {
  const words = filters.q ? queryWords(filters.q) : [];
  const out = [];
  for (const board of boards) {
    if (['arch', 'op_class', 'sub_class', 'quant'].some((f) => filters[f] && board[f] !== filters[f])) continue;
    if (!filters.q) {
      out.push(board);
      continue;
    }
    const entries = board.entries.filter((e) => words.every((word) => haystack(e).includes(word)));
    if (entries.length > 0) out.push({ ...board, entries, count: entries.length });
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
