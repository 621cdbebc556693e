// The leaderboard table shared by the boards overview and the single board view.

import { badge, h, time } from '../dom.js';
import { chooseScale, formatRelative, formatScaled, formatSpeedup, formatSpread, formatNumber } from '../lib/format.js';
import { links } from '../lib/route.js';

const COLUMNS = [
  { key: 'rank', label: '#', cls: 'num col-rank' },
  { key: 'name', label: 'kernel', cls: 'col-name' },
  { key: 'language', label: 'lang', cls: 'col-opt' },
  { key: 'value', label: 'value', cls: 'num' },
  { key: 'spread', label: 'p10–p90', cls: 'num col-opt' },
  { key: 'speedup', label: 'speed-up', cls: 'num' },
  { key: 'submitter', label: 'submitter', cls: 'col-opt2' },
  { key: 'accepted', label: 'acc.', cls: 'num col-opt', title: 'accepted results' },
  { key: 'changed', label: 'last change', cls: 'col-changed' },
];

function header(col, sort, onSort, scale, boardKey) {
  const active = sort.key === col.key;
  const aria = active ? (sort.dir === 'desc' ? 'descending' : 'ascending') : null;
  const label = col.key === 'value' && scale.unit ? `value (${scale.unit})` : col.label;
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

function rankCell(e) {
  const tie = e.tie ? h('span', { class: 'tie', title: `tie: p10–p90 spread overlaps ${e.tieWith.join(', ')}` }, '≈') : null;
  return h('td', { class: 'num col-rank' }, e.rank === null ? '—' : String(e.rank), tie);
}

function nameCell(e) {
  return h(
    'td',
    { class: 'col-name' },
    h('a', { href: links.kernel(e.id), class: 'kname', 'data-focus-key': `k:${e.id}` }, e.name),
    e.isReference ? badge('ref', 'muted', 'the group\'s reference: speed-ups are against it') : null,
    e.disqualified ? badge('DQ', 'bad', `disqualified${e.dqReason ? `: ${e.dqReason}` : ''}`) : null,
    e.suspect && !e.disqualified ? h('span', { class: 'badge tone-warn suspect', title: 'its best result is marked suspect (a tripwire hit or a runtime flag) until a maintainer looks at it' }, 'suspect') : null,
    e.title && e.title !== e.name ? h('span', { class: 'ktitle' }, e.title) : null,
  );
}

function valueCell(e, scale) {
  const title = e.p10 !== null ? `p10 ${formatScaled(e.p10, scale)} · p90 ${formatScaled(e.p90, scale)} ${scale.unit}` : null;
  return h('td', { class: `num value${e.disqualified ? ' struck' : ''}`, title }, formatScaled(e.value, scale));
}

function row(e, scale, now, changed) {
  const cls = [e.disqualified ? 'dq' : '', changed?.has(e.id) ? 'flash' : '', e.rank === 1 ? 'first' : ''].filter(Boolean).join(' ');
  return h(
    'tr',
    { class: cls || null, 'data-kernel': e.id },
    rankCell(e),
    nameCell(e),
    h('td', { class: 'col-opt lang' }, e.language || '—'),
    valueCell(e, scale),
    h('td', { class: 'num col-opt muted' }, formatSpread(e.p10, e.p90, e.value)),
    h('td', { class: `num${e.speedup > 1.0001 ? ' up' : e.speedup !== null && e.speedup < 0.9999 ? ' down' : ''}` }, e.speedup === null ? '—' : formatSpeedup(e.speedup)),
    h('td', { class: 'col-opt2 submitter' }, e.submitter ?? '—'),
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
      h('tbody', {}, entries.map((e) => row(e, scale, now, changed))),
    ),
  );
}

