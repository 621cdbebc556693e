// The SVG history chart: every accepted value over time with its interval, and the best-so-far
// frontier.

import { fill, h } from '../dom.js';
import { formatNumber, formatScore, formatTimestamp, shortId } from '../lib/format.js';
import { chartModel } from '../lib/chart.js';
import { confirmationMark } from '../lib/status.js';

function axes(m, unitLabel) {
  const { margin, width, height } = m;
  const bottom = height - margin.bottom;
  return [
    m.yTicks.map((t) => h('g', { class: 'tick' }, h('line', { x1: margin.left, x2: width - margin.right, y1: t.y, y2: t.y, class: 'grid' }), h('text', { x: margin.left - 6, y: t.y + 4, 'text-anchor': 'end' }, t.label))),
    m.xTicks.map((t) => h('g', { class: 'tick' }, h('line', { x1: t.x, x2: t.x, y1: bottom, y2: bottom + 4, class: 'axis' }), h('text', { x: t.x, y: bottom + 17, 'text-anchor': 'middle' }, t.label))),
    h('line', { x1: margin.left, x2: width - margin.right, y1: bottom, y2: bottom, class: 'axis' }),
    h('line', { x1: margin.left, x2: margin.left, y1: margin.top, y2: bottom, class: 'axis' }),
    h('text', { x: 12, y: margin.top + (bottom - margin.top) / 2, class: 'axis-label', transform: `rotate(-90 12 ${margin.top + (bottom - margin.top) / 2})`, 'text-anchor': 'middle' }, unitLabel),
    h('text', { x: width - margin.right, y: height - 2, class: 'axis-label', 'text-anchor': 'end' }, 'time (UTC)'),
  ];
}

/** The line saying what a point's bar is: its score's interval, or its value's spread. */
function bandText(p, multiplier, unit) {
  const { ratio, interval } = formatScore(p.score);
  const score = p.score ? `speed-up ${p.score.basis === 'absolute' ? '≈ ' : ''}${ratio}${interval ? ` (${interval})` : ''} over the reference` : null;
  const spread = p.bandKind === 'spread' ? `p10–p90 ${formatNumber(p.bandValues[0] * multiplier)}–${formatNumber(p.bandValues[1] * multiplier)} ${unit}` : null;
  return [score, spread];
}

function tooltipText(p, unit, multiplier = 1) {
  return [
    `${formatNumber(p.shown)} ${unit}${p.record ? '  ★ new best' : ''}`,
    ...bandText(p, multiplier, unit),
    confirmationMark(p.confirmation)?.line ?? null,
    formatTimestamp(p.at),
    `commit ${shortId(p.commit ?? p.commits?.source, 10)} · ${p.submitter ?? p.submitter_id ?? 'unknown submitter'}`,
    p.submission_id ? `submission ${shortId(p.submission_id)}` : null,
  ].filter(Boolean);
}

/** A point's bar: a vertical line with caps from one end of its band to the other. */
function bandMark(p) {
  if (!p.band) return null;
  const [y0, y1] = p.band;
  const x = p.cx.toFixed(1);
  const cap = (y) => h('line', { x1: (p.cx - 4).toFixed(1), x2: (p.cx + 4).toFixed(1), y1: y.toFixed(1), y2: y.toFixed(1) });
  return h('g', { class: `band band-${p.bandKind}`, 'aria-hidden': 'true' }, h('line', { x1: x, x2: x, y1: y0.toFixed(1), y2: y1.toFixed(1) }), cap(y0), cap(y1));
}

/**
 * Draw a chart of `history` ([{value, at, commit, submitter, submission_id, band, bandKind,
 * score}], see `withIntervals`) into a new element; `scale` is the display unit from
 * chooseScale; `onPick(point)` opens a point.
 */
export function historyChart(history, { metric, scale, onPick }) {
  const wrap = h('div', { class: 'chart-wrap' });
  const tip = h('div', { class: 'chart-tip', role: 'status', hidden: true });
  let lastWidth = 0;

  function show(p, circle) {
    fill(tip, ...tooltipText(p, scale.unit, scale.multiplier).map((line, i) => h('div', { class: i === 0 ? 'strong' : '' }, line)));
    tip.hidden = false;
    const box = wrap.getBoundingClientRect();
    const dot = circle.getBoundingClientRect();
    const left = Math.min(Math.max(0, dot.left - box.left + 10), Math.max(0, box.width - 240));
    tip.style.left = `${left}px`;
    tip.style.top = `${Math.max(0, dot.top - box.top - 70)}px`;
  }

  function draw() {
    const width = Math.max(320, Math.round(wrap.clientWidth || 720));
    if (Math.abs(width - lastWidth) < 8) return;
    lastWidth = width;
    const m = chartModel(history, { width, height: 260, better: metric.better, multiplier: scale.multiplier });
    const unitLabel = `${metric.name}${scale.unit ? ` (${scale.unit})` : ''} · ${metric.better === 'higher' ? 'higher' : 'lower'} is better`;
    const dots = m.points.map((p) => {
      const circle = h('circle', {
        cx: p.cx.toFixed(1),
        cy: p.cy.toFixed(1),
        r: p.record ? 5 : 3.5,
        class: ['pt', p.record ? 'record' : '', p.confirmation ?? ''].filter(Boolean).join(' '),
        'data-confirmation': p.confirmation,
        tabindex: 0,
        role: 'img',
        'aria-label': tooltipText(p, scale.unit, scale.multiplier).join(', '),
      });
      circle.addEventListener('mouseenter', () => show(p, circle));
      circle.addEventListener('focus', () => show(p, circle));
      circle.addEventListener('mouseleave', () => (tip.hidden = true));
      circle.addEventListener('blur', () => (tip.hidden = true));
      circle.addEventListener('click', () => onPick?.(p));
      circle.addEventListener('keydown', (ev) => ev.key === 'Enter' && onPick?.(p));
      return circle;
    });
    const svg = h(
      'svg',
      { viewBox: `0 0 ${m.width} ${m.height}`, width: m.width, height: m.height, class: 'chart', role: 'group', 'aria-label': `accepted ${metric.name} over time, ${m.points.length} results` },
      axes(m, unitLabel),
      h('path', { d: m.frontier, class: 'frontier' }),
      m.points.map(bandMark),
      dots,
    );
    fill(wrap, svg, tip);
  }

  const marks = [...new Set(history.map((p) => p.confirmation).filter(Boolean))].map(confirmationMark).filter(Boolean);
  const legend = h(
    'div',
    { class: 'legend muted' },
    h('span', { class: 'key key-pt' }), 'accepted result ', h('span', { class: 'key key-record' }), 'new best ', h('span', { class: 'key key-frontier' }), 'best so far ', h('span', { class: 'key key-band' }), "bar: the 95 % interval of its speed-up over the board's reference (measured side by side), or else its p10–p90 spread",
    marks.map((m) => [' ', h('span', { class: `key key-${m.mark}`, title: m.title }), m.line]),
  );
  const observer = typeof ResizeObserver !== 'undefined' ? new ResizeObserver(() => draw()) : null;
  observer?.observe(wrap);
  requestAnimationFrame(draw);
  return h('div', { class: 'chart-box' }, wrap, legend);
}
