// The SVG history chart: every accepted value over time and the best-so-far frontier.

import { fill, h } from '../dom.js';
import { formatNumber, formatTimestamp, shortId } from '../lib/format.js';
import { chartModel } from '../lib/chart.js';

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

function tooltipText(p, unit) {
  return [
    `${formatNumber(p.shown)} ${unit}${p.record ? '  ★ new best' : ''}`,
    formatTimestamp(p.at),
    `commit ${shortId(p.commit ?? p.commits?.source, 10)} · ${p.submitter ?? p.submitter_id ?? 'unknown submitter'}`,
    p.submission_id ? `submission ${shortId(p.submission_id)}` : null,
  ].filter(Boolean);
}

/**
 * Draw a chart of `history` ([{value, at, commit, submitter, submission_id}]) into a new
 * element; `scale` is the display unit from chooseScale; `onPick(point)` opens a point.
 */
export function historyChart(history, { metric, scale, onPick }) {
  const wrap = h('div', { class: 'chart-wrap' });
  const tip = h('div', { class: 'chart-tip', role: 'status', hidden: true });
  let lastWidth = 0;

  function show(p, circle) {
    fill(tip, ...tooltipText(p, scale.unit).map((line, i) => h('div', { class: i === 0 ? 'strong' : '' }, line)));
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
        class: p.record ? 'pt record' : 'pt',
        tabindex: 0,
        role: 'img',
        'aria-label': tooltipText(p, scale.unit).join(', '),
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
      dots,
    );
    fill(wrap, svg, tip);
  }

  const legend = h('div', { class: 'legend muted' }, h('span', { class: 'key key-pt' }), 'accepted result ', h('span', { class: 'key key-record' }), 'new best ', h('span', { class: 'key key-frontier' }), 'best so far');
  const observer = typeof ResizeObserver !== 'undefined' ? new ResizeObserver(() => draw()) : null;
  observer?.observe(wrap);
  requestAnimationFrame(draw);
  return h('div', { class: 'chart-box' }, wrap, legend);
}
