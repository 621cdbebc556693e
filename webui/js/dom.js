// DOM helpers shared by the views: element builder, states, focus-preserving replace.

/** Build an element: h('a', {href, class, onclick}, child, ...). Strings become text. */
export function h(tag, attrs = {}, ...children) {
  const el = tag === 'svg' || SVG_TAGS.has(tag) ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key === 'className' ? 'class' : key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
const SVG_TAGS = new Set(['g', 'path', 'line', 'circle', 'rect', 'text', 'title', 'polyline']);

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children, skipping null/false (replaceChildren would print "null"). */
export function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

/** A loading placeholder. */
export function loading(what = 'Loading') {
  return h('div', { class: 'state state-loading', role: 'status', 'aria-live': 'polite' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), `${what}…`);
}

/** An empty state with a hint. */
export function empty(title, hint = '') {
  return h('div', { class: 'state state-empty' }, h('strong', {}, title), hint ? h('p', {}, hint) : null);
}

/** An error state naming what failed, with a retry button when given one. */
export function failure(error, retry) {
  const code = error?.code && error.code !== 'network_error' ? ` (${error.code})` : '';
  return h(
    'div',
    { class: 'state state-error', role: 'alert' },
    h('strong', {}, error?.status ? `The API answered ${error.status}${code}` : 'The API is unreachable'),
    h('p', {}, error?.message ?? String(error)),
    retry ? h('button', { type: 'button', class: 'btn', onclick: retry }, 'Retry') : null,
  );
}

/** A status / verdict badge. */
export function badge(text, tone = 'info', title = null) {
  return h('span', { class: `badge tone-${tone}`, title }, text);
}

/** A <time> element with the absolute time as its tooltip. */
export function time(iso, text) {
  return h('time', { datetime: iso ?? '', title: iso ?? '' }, text);
}

/**
 * Replace a container's children keeping focus and scroll: the focused element is found
 * again by its data-focus-key in the new content.
 */
export function replaceKeepingFocus(container, ...children) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.dataset.focusKey : null;
  const scroll = window.scrollY;
  fill(container, ...children);
  if (key) container.querySelector(`[data-focus-key="${CSS.escape(key)}"]`)?.focus({ preventScroll: true });
  if (window.scrollY !== scroll) window.scrollTo(0, scroll);
}

/** Set the document title. */
export function setTitle(...parts) {
  document.title = [...parts.filter(Boolean), 'kernel zoo'].join(' · ');
}

/** Run `fn(deadline)` when the page is idle; where requestIdleCallback is missing, soon. */
export function whenIdle(fn) {
  if (typeof requestIdleCallback === 'function') return requestIdleCallback(fn);
  return setTimeout(() => fn({ didTimeout: false, timeRemaining: () => 10 }), 0);
}
