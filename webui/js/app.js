// The shell: hash router, view lifecycle, live indicator, keyboard shortcuts.

import { empty, fill, h, setTitle } from './dom.js';
import { indexStore, live } from './live.js';
import { formatNumber, formatTimestamp } from './lib/format.js';
import { parseHash } from './lib/route.js';
import { createActivityView } from './views/activity.js';
import { createBoardsView } from './views/boards.js';
import { createKernelView } from './views/kernel.js';
import { createSubmissionView } from './views/submission.js';

const ctx = {
  now: () => Date.now(),
  navigate(hash, { replace = false } = {}) {
    if (hash === location.hash) return;
    history[replace ? 'replaceState' : 'pushState'](null, '', hash);
    route();
  },
};

const FACTORIES = {
  boards: createBoardsView,
  board: createBoardsView,
  kernel: createKernelView,
  submission: createSubmissionView,
  activity: createActivityView,
};

let current = null; // {key, view}

function viewKey(r) {
  // boards and board share a module but not a page; a kernel page is its params.
  return `${r.view}:${JSON.stringify(r.params)}`;
}

function notFound(main, r) {
  setTitle('not found');
  fill(main, empty(`Nothing at #${r.params.path}.`, ''), h('p', {}, h('a', { href: '#/' }, 'Go to the boards')));
}

function route() {
  const r = parseHash(location.hash);
  const main = document.getElementById('main');
  for (const a of document.querySelectorAll('[data-nav]')) {
    const on = a.dataset.nav === (r.view === 'board' ? 'boards' : r.view);
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const key = viewKey(r);
  if (current && current.key === key) return current.view.update(r);
  current?.view.unmount();
  current = null;
  if (r.view === 'notfound') return notFound(main, r);
  const view = FACTORIES[r.view](ctx);
  current = { key, view };
  view.mount(main, r);
  if (document.activeElement && !main.contains(document.activeElement)) window.scrollTo(0, 0);
}

function renderLive({ state }) {
  const box = document.getElementById('live-indicator');
  box.dataset.state = state;
  box.querySelector('.live-text').textContent = { open: 'live', connecting: 'connecting…', closed: 'offline', idle: 'offline' }[state];
  box.title = state === 'open' ? 'Receiving events from /api/events' : 'Not connected to the live feed; retrying';
}

function renderFoot({ index }) {
  const foot = document.getElementById('foot-index');
  if (!index) return;
  foot.textContent = `index at event #${formatNumber(index.logSeq)}${index.generatedAt ? ` · ${formatTimestamp(index.generatedAt)}` : ''}${index.headCommit ? ` · head ${String(index.headCommit).slice(0, 10)}` : ''}`;
}

function onKey(ev) {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(ev.target.tagName);
  if (ev.key === '/' && !typing && !ev.ctrlKey && !ev.metaKey) {
    const search = document.getElementById('search');
    if (search) {
      ev.preventDefault();
      search.focus();
      search.select();
    }
  } else if (ev.key === 'Escape' && ev.target.id === 'search') ev.target.blur();
}

live.states.on(renderLive);
indexStore.updates.on(renderFoot);
window.addEventListener('hashchange', route);
document.addEventListener('keydown', onKey);
renderLive({ state: 'connecting' });
live.start();
route();
