// The leaderboard table shared by the boards overview and the single board view.

import { madeBy } from '../lib/provenance.js';
import { badge, h, time } from '../dom.js';
import { chooseScale, formatRelative, formatScaled, formatScore, formatSpread, formatNumber } from '../lib/format.js';
import { links } from '../lib/route.js';
import { confirmationBadge } from './review.js';

const COLUMNS = [
  { key: 'rank', label: '#', cls: 'num col-rank' },
  { key: 'name', label: 'kernel', cls: 'col-name' },
  { key: 'language', label: 'lang', cls: 'col-opt' },
  { key: 'speedup', label: 'speed-up', cls: 'num col-score', title: "speed-up over the board's pinned reference, with its 95 % interval" },
  { key: 'value', label: 'best', cls: 'num', title: 'the best absolute value' },
  { key: 'device', label: 'device', cls: 'col-opt' },
  { key: 'spread', label: 'p10–p90', cls: 'num col-opt' },
  { key: 'submitter', label: 'submitter', cls: 'col-opt2' },
  { key: 'accepted', label: 'acc.', cls: 'num col-opt', title: 'accepted results' },
  { key: 'changed', label: 'last change', cls: 'col-changed' },
];

function header(col, sort, onSort, scale, boardKey) {
  const active = sort.key === col.key;
  const aria = active ? (sort.dir === 'desc' ? 'descending' : 'ascending') : null;
  const label = col.key === 'value' && scale.unit ? `best (${scale.unit})` : col.label;
  const arrow = active ? (sort.dir === 'desc' ? ' ▾' : ' ▴') : '';
  return h(
    'th',
    { scope: 'col', class: col.cls, 'aria-sort': aria, title: col.title },
    h(
      'button',
      {
        type: 'button',
        class: 'sort',
        'data-focus-key': `sort:${boardKey}:${col.key}`,
        onclick: () => onSort(col.key, active && sort.dir === 'asc' ? 'desc' : 'asc'),
      },
      label,
      h('span', { class: 'arrow', 'aria-hidden': 'true' }, arrow),
    ),
  );
}

/** The names of the other kernels sharing `e`'s rank. */
function peers(e) {
  return e.tieWith.map((id) => id.slice(id.lastIndexOf('/') + 1)).join(', ');
}

function rankCell(e) {
  const tie = e.tie ? h('span', { class: 'tie', title: `tie: shares rank ${e.rank} with ${peers(e)} — their speed-ups' 95 % intervals overlap, so the board cannot tell them apart` }, 'tie') : null;
  return h('td', { class: 'num col-rank' }, e.rank === null ? '—' : String(e.rank), tie ? [' ', tie] : null);
}

const BASIS_NOTE = {
  side_by_side: (ref) => `speed-up over ${ref} measured side by side in the same task, with its 95 % interval`,
  reference: () => "the board's pinned reference: every speed-up is over it",
  absolute: (ref) => `≈ estimate from absolute values: this kernel's value and ${ref}'s, measured apart (a result from before side-by-side scoring), no interval`,
};

/**
 * The score: ratio ± interval measured side by side; the basis named when it is not; beside it
 * the current result's confirmation mark once it took rank 1 (awaiting a second run, confirmed,
 * disputed).
 */
function scoreCell(e, referenceName) {
  const s = e.score;
  if (s === null || e.disqualified) return h('td', { class: 'num col-score' }, '—');
  const tone = s.speedup > 1.0001 ? ' up' : s.speedup < 0.9999 ? ' down' : '';
  const { ratio, interval } = formatScore(s);
  return h(
    'td',
    { class: `num col-score${tone}`, 'data-basis': s.basis, title: `${ratio}${interval ? ` (${interval})` : ''}: ${(BASIS_NOTE[s.basis] ?? (() => s.basis))(referenceName ?? 'the reference')}` },
    h('span', { class: 'ratio' }, s.basis === 'absolute' ? `≈ ${ratio}` : ratio),
    interval ? h('span', { class: 'interval' }, ` (${interval})`) : null,
    s.basis === 'absolute' || s.basis === 'reference' ? [' ', h('span', { class: 'basis' }, s.basis === 'absolute' ? 'estimate' : 'reference')] : null,
    e.confirmation ? [' ', confirmationBadge(e.confirmation)] : null,
  );
}

function nameCell(e) {
  return h(
    'td',
    { class: 'col-name' },
    h('a', { href: links.kernel(e.id), class: 'kname', 'data-focus-key': `k:${e.id}` }, e.name),
    e.isReference ? badge('ref', 'muted', "the board's pinned reference: speed-ups are over it") : null,
    e.disqualified ? badge('DQ', 'bad', `disqualified${e.dqReason ? `: ${e.dqReason}` : ''}`) : null,
    e.suspect && !e.disqualified ? h('span', { class: 'badge tone-warn suspect', title: 'its best result is marked suspect (a tripwire hit or a runtime flag) until a maintainer looks at it' }, 'suspect') : null,
    e.title && e.title !== e.name ? h('span', { class: 'ktitle' }, e.title) : null,
  );
}

function valueCell(e, scale) {
  const title = e.p10 !== null ? `p10 ${formatScaled(e.p10, scale)} · p90 ${formatScaled(e.p90, scale)} ${scale.unit}${e.device ? ` · on ${e.device}` : ''}` : e.device ? `on ${e.device}` : null;
  return h('td', { class: `num value${e.disqualified ? ' struck' : ''}`, title }, formatScaled(e.value, scale));
}

function row(e, scale, now, changed, referenceName) {
  const cls = [e.disqualified ? 'dq' : '', changed?.has(e.id) ? 'flash' : '', e.rank === 1 ? 'first' : '', e.confirmation === 'disputed' ? 'disputed' : ''].filter(Boolean).join(' ');
  return h(
    'tr',
    { class: cls || null, 'data-kernel': e.id, 'data-confirmation': e.confirmation },
    rankCell(e),
    nameCell(e),
    h('td', { class: 'col-opt lang' }, e.language || '—'),
    scoreCell(e, referenceName),
    valueCell(e, scale),
    h('td', { class: 'col-opt device muted' }, e.device ?? '—'),
    h('td', { class: 'num col-opt muted' }, formatSpread(e.p10, e.p90, e.value)),
    h('td', { class: 'col-opt2 submitter' }, e.submitter ?? '—', e.provenance ? h('span', { class: 'muted made-by' }, ` · ${madeBy(e.provenance)}`) : null),
    h('td', { class: 'num col-opt' }, formatNumber(e.acceptedCount)),
    h('td', { class: 'col-changed muted' }, time(e.lastActivityAt, formatRelative(e.lastActivityAt, now))),
  );
}

/** The display scale of a board: one unit for every row, chosen from its values. */
export function boardScale(board) {
  return chooseScale(board.entries.map((e) => e.value), board.metric.unit);
}

/**
 * A leaderboard table. `sort` is {key, dir}; `onSort(key, dir)` is called by the headers;
 * `changed` is a Set of kernel ids to highlight.
 */
export function boardTable(board, entries, { sort, onSort, now, changed, scale = boardScale(board), caption }) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'board' },
      caption ? h('caption', { class: 'sr-only' }, caption) : null,
      h('thead', {}, h('tr', {}, COLUMNS.map((c) => header(c, sort, onSort, scale, board.key)))),
      h('tbody', {}, entries.map((e) => row(e, scale, now, changed, board.referenceId?.split('/')[4]))),
    ),
  );
}

