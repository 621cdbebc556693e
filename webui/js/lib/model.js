// Pure read model: index.json into boards, then filter, sort and page them. index.json ranks
// each board, scores each kernel and names each board's reference; the model takes all three as
// they are. A board is built (its kernels read) the first time its entries are read, so a page
// of boards costs that page, not the whole index.

import { matchesMaker } from './provenance.js';
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
 * An index.json value entry (a kernel's `best`, `current` or a history row: `{value, at, commit,
 * spread: {p10, p90}, submission, submitter, score, device, suspect, confirmation}`) in the views'
 * shape. `confirmation` is the result's mark once it took rank 1 on its board and is run again:
 * `unconfirmed`, `confirmed` or `disputed` (null: never run again).
 */
export function valueEntry(raw) {
  if (!raw || num(raw.value) === null) return null;
  return {
    value: raw.value,
    p10: num(raw.spread?.p10),
    p90: num(raw.spread?.p90),
    at: raw.at ?? null,
    commit: raw.commit ?? null,
    submission: raw.submission ?? null,
    submitter: raw.submitter ?? null,
    score: scoreOf(raw.score),
    device: raw.device ?? null,
    suspect: raw.suspect === true,
    confirmation: raw.confirmation ?? null,
  };
}

/**
 * What index.json knows of each of a kernel's results, by submission: its history rows, best
 * and current as value entries (`valueEntry`), each with its score, spread and confirmation
 * mark; a result listed twice is merged. Returns [{submission, value, score, p10, p90,
 * confirmation, ...}].
 */
export function knownResults(kernel) {
  if (!kernel) return [];
  const bySubmission = new Map();
  for (const entry of [...(kernel.history ?? []).map(valueEntry), kernel.best, kernel.current]) {
    if (!entry?.submission) continue;
    const known = bySubmission.get(entry.submission) ?? {};
    const merged = { ...known };
    for (const [key, value] of Object.entries(entry)) if (value !== null && value !== false) merged[key] = value;
    bySubmission.set(entry.submission, { suspect: false, ...merged });
  }
  return [...bySubmission.values()];
}

/**
 * A scoreboard entry (bench_result.yaml's `best`/`current`: `{value, workloads, submission_id,
 * submitter, runner_id, at, commit}`), with the headline's spread derived from its workloads.
 */
export function scoreboardEntry(raw) {
  if (!raw || num(raw.value) === null) return null;
  const { p10, p90 } = spreadFromWorkloads(raw.workloads, raw.value);
  return { ...raw, p10, p90 };
}

/**
 * index.json's `score` (`{speedup, interval: [low, high] | null, basis}`) as
 * `{speedup, low, high, basis}`, or null.
 */
export function scoreOf(raw) {
  if (!raw || num(raw.speedup) === null) return null;
  const [low, high] = Array.isArray(raw.interval) ? raw.interval : [null, null];
  return { speedup: raw.speedup, low: num(low), high: num(high), basis: raw.basis };
}

/**
 * index.json lists a kernel's disqualified submissions (`disqualified: [uuid]`); their values
 * are out of `best`. A kernel whose every result is disqualified stays on its board, marked.
 */
export function disqualification(raw, best) {
  const n = (raw.disqualified ?? []).length;
  if (n === 0 || best) return { disqualified: false, dqReason: null, dqCount: n };
  const ids = raw.disqualified.map((s) => String(s).slice(0, 8)).join(', ');
  return { disqualified: true, dqReason: `${n} result${n === 1 ? '' : 's'} disqualified (${ids})`, dqCount: n };
}

/** A kernel entry's board key: its first four parts, as index.json names them. */
function boardKey(raw) {
  return `${raw.arch}/${raw.op_class}/${raw.sub_class}/${raw.quant}`;
}

/**
 * One index.json kernel entry into the flat shape the views use. `ranked` is its row in the
 * board's `leaderboards` list (`{rank, tied, confirmation, score, value, unranked, held_back}`):
 * the score and value there are those of the result that stands for the kernel (its newest
 * settled, undisputed, unflagged one), `rank` null with the reason in `unranked` when none
 * does; undefined for a kernel the index does not list (no accepted result left).
 * `reference` is the board's pinned reference kernel id.
 */
export function normaliseKernel(raw, ranked = undefined, reference = null) {
  const metric = raw.metric ?? {};
  const best = valueEntry(raw.best);
  const current = valueEntry(raw.current);
  const dq = disqualification(raw, best);
  const score = scoreOf(ranked?.score ?? raw.score);
  const shown = Number.isFinite(ranked?.value) ? ranked.value : best ? best.value : null;
  return {
    id: raw.id,
    arch: raw.arch,
    op_class: raw.op_class,
    sub_class: raw.sub_class,
    quant: raw.quant,
    name: raw.name,
    group: boardKey(raw),
    title: raw.title ?? '',
    language: raw.language ?? '',
    metric: { name: metric.name ?? 'value', unit: metric.unit ?? '', better: metric.better === 'higher' ? 'higher' : 'lower' },
    best,
    current,
    value: shown,
    p10: best ? best.p10 : null,
    p90: best ? best.p90 : null,
    device: best?.device ?? null,
    score,
    speedup: score?.speedup ?? null,
    submitter: best?.submitter ?? current?.submitter ?? null,
    // Who made its current result (the board filters by these), when its submitter said.
    model: raw.current?.provenance?.model ?? null,
    agent: raw.current?.provenance?.agent ?? null,
    provenance: raw.current?.provenance ?? null,
    acceptedCount: raw.accepted_count ?? 0,
    lastActivityAt: raw.last_activity_at ?? null,
    history: raw.history ?? [],
    disqualified: dq.disqualified,
    dqReason: dq.dqReason,
    dqCount: dq.dqCount,
    // A current result marked suspect (a tripwire hit, a runtime flag, a rival voided beside it)
    // that no maintainer has cleared yet: listed, marked, held back from any rank.
    suspect: ranked?.suspect === true || current?.suspect === true || best?.suspect === true,
    // Why no result of the kernel ranks (rank null), and which newer result is held back.
    unranked: ranked?.unranked ?? raw.unranked ?? null,
    heldBack: ranked?.held_back ?? raw.held_back ?? null,
    // Its current result's confirmation mark (index.json's leaderboard entry, else its current).
    confirmation: ranked?.confirmation ?? current?.confirmation ?? null,
    isReference: reference !== null && raw.id === reference,
    rank: ranked?.rank ?? null,
    tied: ranked?.tied === true,
    tie: false,
    tieWith: [],
  };
}

/**
 * A board's kernels in index.json's order: the ranked ones as `ranking` lists them, then the
 * unranked ones (no result left: imported, not run yet, or every result disqualified), the
 * disqualified last, by id. Kernels sharing a rank are a tie: each names the others.
 */
function buildBoard(raws, ranking, reference) {
  const place = new Map(ranking.map((r, i) => [r.kernel_id, i]));
  const kernels = raws.map((raw) => normaliseKernel(raw, ranking[place.get(raw.id)], reference));
  const order = (k) => place.get(k.id) ?? ranking.length + (k.disqualified ? 1 : 0);
  const entries = kernels.sort((a, b) => order(a) - order(b) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const byRank = new Map();
  for (const e of entries) if (e.rank !== null) byRank.set(e.rank, [...(byRank.get(e.rank) ?? []), e]);
  for (const group of byRank.values()) {
    if (group.length < 2) continue;
    for (const e of group) {
      e.tie = true;
      e.tieWith = group.filter((o) => o !== e).map((o) => o.id);
    }
  }
  const live = kernels.find((k) => !k.disqualified && k.value !== null) ?? kernels[0];
  return { metric: live.metric, entries };
}

/**
 * A board of raw kernel entries. `count`, the key's parts, its review and its reference are there
 * at once; `metric` and the ranked `entries` are built on first read (or by `build()`), once.
 */
function lazyBoard(key, raws, ranking, info) {
  const [arch, op_class, sub_class, quant] = key.split('/');
  const reference = info?.reference?.kernel_id ?? null;
  let built = null;
  const build = () => (built ??= buildBoard(raws, ranking, reference));
  return {
    key,
    arch,
    op_class,
    sub_class,
    quant,
    count: raws.length,
    reviewed: info?.reviewed !== false,
    reviewedBy: info?.reviewed_by ?? null,
    judgeKernel: info?.judge_kernel ?? null,
    referenceId: reference,
    referenceCommit: info?.reference?.commit ?? null,
    /** Where an imported board's problem came from: its reference kernel's `problem`. */
    problem: (reference && raws.find((r) => r.id === reference)?.problem) || null,
    get built() {
      return built !== null;
    },
    build,
    get metric() {
      return build().metric;
    },
    get entries() {
      return build().entries;
    },
    /** The models and agents that made its kernels' current results, read without building. */
    makers(field) {
      return raws.map((r) => r.current?.provenance?.[field]).filter(Boolean);
    },
  };
}

/** Board keys in display order: reviewed boards first, unreviewed ones listed apart after them. */
export function orderBoards(keys, reviewedOf) {
  return [...keys].sort((a, b) => Number(!reviewedOf(a)) - Number(!reviewedOf(b)) || (a < b ? -1 : a > b ? 1 : 0));
}

/** id -> normalised kernel, read like a Map; a lookup builds only that kernel's board. */
function kernelLookup(boards) {
  const byKey = new Map(boards.map((b) => [b.key, b]));
  const get = (id) => byKey.get(id.slice(0, id.lastIndexOf('/')))?.entries.find((e) => e.id === id);
  return {
    size: boards.reduce((n, b) => n + b.count, 0),
    get,
    has: (id) => get(id) !== undefined,
    *[Symbol.iterator]() {
      for (const board of boards) for (const e of board.entries) yield [e.id, e];
    },
  };
}

/** GET /api/runners' items (`{runner_id, arches, device, last_heartbeat, state, busy_with}`): the runners' liveness. */
export function normaliseRunners(items) {
  return (items ?? []).map((r) => ({ ...r, id: r.runner_id, lastHeartbeatAt: r.last_heartbeat ?? null }));
}

function listQueue(raw) {
  return Object.entries(raw ?? {})
    .map(([arch, q]) => ({ arch, queued: q.queued ?? 0, running: q.running ?? 0 }))
    .sort((a, b) => (a.arch < b.arch ? -1 : 1));
}

/**
 * Normalise a whole index.json document. One pass groups the raw kernels by board; each board
 * reads its kernels when first read (see `lazyBoard`), `buildBoards` builds the rest ahead of
 * need. Ranks, ties, scores and references are the index's.
 */
export function normaliseIndex(raw) {
  const groups = new Map();
  for (const k of raw?.kernels ?? []) {
    const key = boardKey(k);
    const members = groups.get(key);
    if (members) members.push(k);
    else groups.set(key, [k]);
  }
  const infos = raw?.boards ?? {};
  const rankings = { ...raw?.unreviewed_leaderboards, ...raw?.leaderboards };
  const order = orderBoards(groups.keys(), (key) => infos[key]?.reviewed !== false);
  const boards = order.map((key) => lazyBoard(key, groups.get(key), rankings[key] ?? [], infos[key]));
  return {
    schemaVersion: raw?.schema_version ?? null,
    logSeq: raw?.log_seq ?? 0,
    headCommit: raw?.head_commit ?? null,
    generatedAt: raw?.generated_at ?? null,
    kernels: kernelLookup(boards),
    boards,
    queue: listQueue(raw?.queue),
    // The runners the log knows ({id, arches, device, registered_at, state}); not their liveness.
    runners: raw?.runners ?? [],
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

/** True when kernel `id` is new in `index` or its value (ranked or best), score, rank, confirmation, disqualification or activity changed. */
export function kernelChanged(previous, index, id) {
  const k = index.kernels.get(id);
  if (!k) return false;
  const old = previous.kernels.get(id);
  return !old || old.value !== k.value || old.best?.value !== k.best?.value || old.speedup !== k.speedup || old.rank !== k.rank || old.confirmation !== k.confirmation || old.disqualified !== k.disqualified || old.lastActivityAt !== k.lastActivityAt;
}

/** Distinct archs, op classes and quants across boards, sorted, for the filter menus. */
export function facets(boards) {
  const pick = (field) => [...new Set(boards.map((b) => b[field]))].sort();
  const made = (field) => [...new Set(boards.flatMap((b) => (b.makers ? b.makers(field) : b.entries.map((e) => e[field]))).filter(Boolean))].sort();
  return { arch: pick('arch'), op_class: pick('op_class'), sub_class: pick('sub_class'), quant: pick('quant'), model: made('model'), agent: made('agent') };
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
    if (!filters.q && !filters.model && !filters.agent) {
      out.push(board);
      continue;
    }
    const entries = board.entries.filter((e) => matchesMaker(e, filters) && words.every((word) => haystack(e).includes(word)));
    if (entries.length > 0) out.push({ ...board, entries, count: entries.length });
  }
  return out;
}

const SORT_KEYS = {
  rank: (e) => (e.rank === null ? null : e.rank),
  name: (e) => e.name.toLowerCase(),
  value: (e) => e.value,
  spread: (e) => (e.p10 === null || e.p90 === null || !e.value ? null : Math.abs(e.p90 - e.p10) / e.value),
  speedup: (e) => (e.disqualified ? null : e.speedup),
  device: (e) => e.device,
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
