// Leaderboards: the overview of every board (#/) and one full board (#/board/a/o/s/q),
// with filters, search, sortable columns, paging, live updates and time travel.

import { empty, failure, fill, h, loading, replaceKeepingFocus, setTitle, time } from '../dom.js';
import { indexAt, indexStore } from '../live.js';
import { describeMetric, formatNumber, formatTimestamp, shortId } from '../lib/format.js';
import { facets, filterBoards, kernelChanged, pageOf, sortEntries } from '../lib/model.js';
import { problemFacts } from '../lib/problem.js';
import { formatHash, links } from '../lib/route.js';
import { unreviewedBadge } from './review.js';
import { boardScale, boardTable } from './table.js';

export const BOARDS_PER_PAGE = 8;
export const ROWS_PER_CARD = 10;
export const ROWS_PER_PAGE = 100;

function filtersOf(route) {
  const q = route.query;
  const made = { model: q.model ?? '', agent: q.agent ?? '' };
  if (route.view === 'board') return { ...route.params, q: q.q ?? '', ...made };
  return { arch: q.arch ?? '', op_class: q.op ?? '', quant: q.quant ?? '', q: q.q ?? '', ...made };
}

function select(label, name, values, current, onChange) {
  const id = `f-${name}`;
  return h(
    'label',
    { class: 'field', for: id },
    h('span', {}, label),
    h('select', { id, name, onchange: (ev) => onChange(ev.target.value) }, h('option', { value: '' }, 'all'), values.map((v) => h('option', { value: v, selected: v === current }, v))),
  );
}

/** The kernels to flash after a live update, asked per row shown: only those boards are compared. */
function changesSince(previous, index) {
  if (!previous) return new Set();
  return { has: (id) => kernelChanged(previous, index, id) };
}

function pager(p, goTo, label) {
  if (p.pages <= 1) return null;
  const button = (text, page, key) => h('button', { type: 'button', class: 'btn', disabled: page < 1 || page > p.pages, 'data-focus-key': `page:${key}`, onclick: () => goTo(page) }, text);
  return h(
    'nav',
    { class: 'pager', 'aria-label': `${label} pages` },
    button('« first', 1, 'first'),
    button('‹ prev', p.page - 1, 'prev'),
    h('span', { class: 'muted' }, `page ${p.page} of ${p.pages} · ${formatNumber(p.total)} ${label}`),
    button('next ›', p.page + 1, 'next'),
    button('last »', p.pages, 'last'),
  );
}

/** The heading above the first unreviewed board of a page: they are listed apart. */
function unreviewedHeading() {
  return h('div', { class: 'unreviewed-head', role: 'note' }, h('h2', {}, 'Unreviewed boards'), h('p', { class: 'muted' }, 'Boards opened by a submission whose judge (benchmark.py, build_test_env.py) no maintainer has reviewed yet. Their rankings are not comparable with the reviewed boards above.'));
}

/** "speed-ups over the pinned reference <kernel> (pinned at <commit>)", linking both. */
function referenceNote(board) {
  if (!board.referenceId) return null;
  const name = board.referenceId.split('/')[4];
  const commit = board.referenceCommit;
  return h(
    'span',
    { class: 'muted reference', title: "every kernel's speed-up is over this kernel's src/ as pinned" },
    ' · speed-ups over the pinned reference ',
    h('a', { href: links.kernel(board.referenceId), class: 'mono ref-link' }, name),
    commit ? [' (at ', h('a', { href: links.commit(commit), class: 'mono commit-link', title: commit }, shortId(commit, 10)), ')'] : null,
  );
}

export function createBoardsView(ctx) {
  let root;
  let route;
  let index = null;
  let liveIndex = null;
  let changed = new Set();
  let toolbarSlot;
  let travelSlot;
  let body;
  let unsubscribe = () => {};
  let searchTimer = null;
  let awaitingIndex = false;

  const set = (patch, replace = false) => ctx.navigate(formatHash(route.view, route.params, { ...route.query, ...patch }), { replace });

  function renderToolbar() {
    const f = filtersOf(route);
    const all = liveIndex ?? index;
    const fc = all ? facets(all.boards) : { arch: [], op_class: [], quant: [], model: [], agent: [] };
    const search = h('input', {
      id: 'search',
      type: 'search',
      placeholder: 'search kernels, titles, submitters  ( / )',
      value: f.q,
      'aria-label': 'search kernels',
      autocomplete: 'off',
      oninput: (ev) => {
        clearTimeout(searchTimer);
        const value = ev.target.value;
        searchTimer = setTimeout(() => set({ q: value, page: '' }, true), 120);
      },
    });
    const fields =
      route.view === 'boards'
        ? [
            select('arch', 'arch', fc.arch, f.arch, (v) => set({ arch: v, page: '' })),
            select('op class', 'op', fc.op_class, f.op_class, (v) => set({ op: v, page: '' })),
            select('quant', 'quant', fc.quant, f.quant, (v) => set({ quant: v, page: '' })),
          ]
        : [];
    // Who made each kernel's current result (provenance), when any submitter said.
    if (fc.model.length || f.model) fields.push(select('model', 'model', fc.model, f.model, (v) => set({ model: v, page: '' })));
    if (fc.agent.length || f.agent) fields.push(select('agent', 'agent', fc.agent, f.agent, (v) => set({ agent: v, page: '' })));
    fill(toolbarSlot, h('div', { class: 'toolbar', role: 'search' }, fields, h('label', { class: 'field grow', for: 'search' }, h('span', {}, 'search'), search)));
  }

  function renderTravel() {
    const at = route.query.at ? Number(route.query.at) : null;
    const max = liveIndex?.logSeq ?? index?.logSeq ?? 0;
    if (max < 1 && at === null) return fill(travelSlot, );
    const input = h('input', { type: 'range', id: 'at-range', min: 1, max: Math.max(max, at ?? 1), value: at ?? max, 'aria-label': 'log position', oninput: (ev) => (num.value = ev.target.value) });
    const num = h('input', { type: 'number', id: 'at-seq', min: 1, max: Math.max(max, at ?? 1), value: at ?? max, 'aria-label': 'log sequence number' });
    const go = () => set({ at: Number(num.value) >= max ? '' : num.value, page: '' });
    input.addEventListener('change', () => go());
    num.addEventListener('keydown', (ev) => ev.key === 'Enter' && go());
    const banner =
      at !== null
        ? h('div', { class: 'travel-banner', role: 'status' }, `Showing the board as it stood after event #${at}${index?.generatedAt ? ` (${formatTimestamp(index.generatedAt)})` : ''}. Live updates are paused.`, h('button', { type: 'button', class: 'btn', onclick: () => set({ at: '' }) }, 'Back to live'))
        : null;
    fill(travelSlot, 
      h('details', { class: 'travel', open: at !== null }, h('summary', {}, at !== null ? `time travel: event #${at}` : 'time travel'), h('div', { class: 'travel-row' }, h('span', { class: 'muted' }, '#1'), input, h('span', { class: 'muted' }, `#${max}`), num, h('button', { type: 'button', class: 'btn', onclick: go }, 'Show'))),
      banner,
    );
  }

  const sortOf = () => ({ key: route.query.sort || 'rank', dir: route.query.dir === 'desc' ? 'desc' : 'asc' });
  const onSort = (key, dir) => set({ sort: key === 'rank' && dir === 'asc' ? '' : key, dir: dir === 'asc' ? '' : dir }, true);

  function boardHeading(board, link) {
    const title = `${board.arch} · ${board.op_class} / ${board.sub_class} · ${board.quant}`;
    const unit = boardScale(board).unit;
    return h(
      'div',
      { class: 'board-head' },
      h('h2', {}, link ? h('a', { href: links.board(board.key, route.query.at ? { at: route.query.at } : {}), 'data-focus-key': `b:${board.key}` }, title) : title),
      board.reviewed === false ? unreviewedBadge() : null,
      h('span', { class: 'muted metric' }, describeMetric(board.metric, unit)),
      referenceNote(board),
    );
  }

  function renderOverview(filtered) {
    const p = pageOf(filtered, route.query.page, BOARDS_PER_PAGE);
    const kernels = filtered.reduce((n, b) => n + b.count, 0);
    const cards = p.items.flatMap((board, i) => {
      const entries = sortEntries(board.entries, sortOf().key, sortOf().dir);
      const shown = entries.slice(0, ROWS_PER_CARD);
      const more = entries.length - shown.length;
      const apart = board.reviewed === false && (i === 0 || p.items[i - 1].reviewed !== false) ? [unreviewedHeading()] : [];
      return [...apart, h(
        'section',
        { class: `card${board.reviewed === false ? ' unreviewed-board' : ''}`, 'aria-label': board.key, 'data-board': board.key, 'data-reviewed': String(board.reviewed !== false) },
        boardHeading(board, true),
        boardTable(board, shown, { sort: sortOf(), onSort, now: ctx.now(), changed, caption: board.key }),
        more > 0 ? h('a', { class: 'more', href: links.board(board.key, { q: route.query.q, at: route.query.at }) }, `all ${formatNumber(entries.length)} kernels on this board →`) : null,
      )];
    });
    return [h('p', { class: 'summary muted', role: 'status' }, `${formatNumber(kernels)} kernels on ${formatNumber(filtered.length)} boards`), ...cards, pager(p, (page) => set({ page }), 'boards')];
  }

  function renderBoard(board) {
    const entries = sortEntries(board.entries, sortOf().key, sortOf().dir);
    const p = pageOf(entries, route.query.page, ROWS_PER_PAGE);
    return [
      h('section', { class: `card${board.reviewed === false ? ' unreviewed-board' : ''}`, 'data-board': board.key, 'data-reviewed': String(board.reviewed !== false) }, boardHeading(board, false), problemNote(board), boardTable(board, p.items, { sort: sortOf(), onSort, now: ctx.now(), changed, caption: board.key })),
      pager(p, (page) => set({ page }), 'kernels'),
    ];
  }

  /** An imported board's set and licence conditions, as index.json carries its reference's. */
  function problemNote(board) {
    const facts = problemFacts(board.problem ? { 'x-problem': board.problem } : null);
    if (!facts) return null;
    return h('div', { class: 'problem-note' }, h('p', { class: `muted${facts.conditions ? ' licence-conditions' : ''}`, role: 'note' }, `Imported from ${facts.set} (${facts.facts.find(([k]) => k === 'problem')?.[1] ?? ''}). `, facts.conditions ? [h('strong', {}, 'Licence with conditions: '), facts.conditions] : facts.licence ? `Licence: ${facts.licence}.` : null));
  }

  function renderBody() {
    if (!index) return;
    const filters = filtersOf(route);
    const filtered = filterBoards(index.boards, filters);
    let content;
    if (index.boards.length === 0) content = empty('No kernels yet.', 'Submit a kernel package (kz submit) or import a kernel repo (kz import); it appears here when its first result is accepted.');
    else if (route.view === 'board') {
      const board = index.boards.find((b) => b.key === route.params.group);
      const shown = filtered.find((b) => b.key === route.params.group);
      if (!board) content = empty(`No board ${route.params.group}${route.query.at ? ` at #${route.query.at}` : ''}.`, 'Boards exist per arch/op_class/sub_class/quant once a kernel of that group is known.');
      else content = shown ? renderBoard(shown) : [boardHeading(board, false), empty('No kernel on this board matches the search.')];
    } else content = filtered.length ? renderOverview(filtered) : empty('No board matches these filters.', 'Clear the search or pick “all” in a filter.');
    replaceKeepingFocus(body, content);
    body.setAttribute('aria-busy', 'false');
    if (!performance.getEntriesByName('kz:boards-rendered').length) performance.mark('kz:boards-rendered');
  }

  async function loadIndex() {
    const at = route.query.at ? Number(route.query.at) : null;
    if (at !== null) {
      fill(body, loading(`Loading the index at #${at}`));
      try {
        index = await indexAt(at);
      } catch (error) {
        fill(body, failure(error, () => loadIndex()));
        return;
      }
    } else {
      index = liveIndex = indexStore.index;
      if (!index) {
        fill(body, loading('Loading boards'));
        awaitingIndex = true;
        await indexStore.load();
        awaitingIndex = false;
        if (!indexStore.index) {
          fill(body, failure(indexStore.error, () => loadIndex()));
          return;
        }
        index = liveIndex = indexStore.index;
      }
    }
    if (!liveIndex && indexStore.index) liveIndex = indexStore.index;
    renderToolbar();
    renderTravel();
    renderBody();
  }

  function onIndexUpdate({ index: next, previous, error }) {
    if (error || !next) return;
    liveIndex = next;
    if (awaitingIndex) return; // loadIndex draws the index it waits for, once
    if (route.query.at) return renderTravel();
    const recovered = !index; // the first load failed and a live update brought the index
    changed = changesSince(previous, next);
    index = next;
    if (recovered) renderToolbar();
    renderTravel();
    renderBody();
    changed = new Set();
  }

  function title() {
    setTitle(route.view === 'board' ? route.params.group : 'boards');
  }

  return {
    mount(container, r) {
      root = container;
      route = r;
      toolbarSlot = h('div');
      travelSlot = h('div', { class: 'travel-slot' });
      body = h('div', { class: 'boards', 'aria-busy': 'true', 'aria-live': 'off' });
      const crumbs = route.view === 'board' ? h('nav', { class: 'crumbs', 'aria-label': 'breadcrumb' }, h('a', { href: links.boards(route.query.at ? { at: route.query.at } : {}) }, 'boards'), ' / ', route.params.group) : null;
      fill(root, h('div', { class: 'page-head' }, h('h1', {}, route.view === 'board' ? 'Leaderboard' : 'Leaderboards'), crumbs), toolbarSlot, travelSlot, body);
      unsubscribe = indexStore.updates.on(onIndexUpdate);
      title();
      loadIndex();
    },
    update(r) {
      const atChanged = (r.query.at ?? '') !== (route.query.at ?? '');
      route = r;
      title();
      if (atChanged) return loadIndex();
      if (document.activeElement?.id !== 'search') renderToolbar();
      renderBody();
    },
    unmount() {
      unsubscribe();
      clearTimeout(searchTimer);
    },
  };
}
