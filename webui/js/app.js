// The shell: hash router, view lifecycle, live indicator, keyboard shortcuts.

import { empty, fill, h, loading, setTitle, whenIdle } from './dom.js';
import { indexStore, live } from './live.js';
import { formatNumber, formatTimestamp } from './lib/format.js';
import { parseHash } from './lib/route.js';
import { createBoardsView } from './views/boards.js';

const ctx = {
  now: () => Date.now(),
  navigate(hash, { replace = false } = {}) {
    if (hash === location.hash) return;
    history[replace ? 'replaceState' : 'pushState'](null, '', hash);
    route();
  },
};

// The boards are the first page most visits see: only their modules load before it is drawn.
// The other views are imported on first visit, or in idle time once the index is in.
const FACTORIES = { boards: createBoardsView, board: createBoardsView };
const LAZY = {
  kernel: () => import('./views/kernel.js').then((m) => m.createKernelView),
  submission: () => import('./views/submission.js').then((m) => m.createSubmissionView),
  commit: () => import('./views/commit.js').then((m) => m.createCommitView),
  activity: () => import('./views/activity.js').then((m) => m.createActivityView),
};

let current = null; // {key, view}
let routing = 0; // the latest route(): a view that finishes loading after a newer one stays unmounted

function viewKey(r) {
  // boards and board share a module but not a page; a kernel page is its params.
  return `${r.view}:${JSON.stringify(r.params)}`;
}

function notFound(main, r) {
  setTitle('not found');
  fill(main, empty(`Nothing at #${r.params.path}.`, ''), h('p', {}, h('a', { href: '#/' }, 'Go to the boards')));
}

const imports = {};

/** Import a lazy view's module, once (again after a failure); resolves to its factory. */
function importView(name) {
  imports[name] ??= LAZY[name]().then(
    (factory) => (FACTORIES[name] = factory),
    (error) => {
      delete imports[name];
      throw error;
    },
  );
  return imports[name];
}

async function route() {
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
  const ticket = ++routing;
  let factory = FACTORIES[r.view];
  if (!factory) {
    fill(main, loading('Loading'));
    try {
      factory = await importView(r.view);
    } catch (error) {
      if (ticket === routing) fill(main, empty(`Could not load this page: ${error?.message ?? error}`, 'Reload the page to try again.'));
      return;
    }
  }
  if (ticket !== routing) return;
  const view = factory(ctx);
  current = { key, view };
  view.mount(main, r);
  if (document.activeElement && !main.contains(document.activeElement)) window.scrollTo(0, 0);
}

/** Import the other views when the page is idle after the first index, so their first visit is instant. */
function prefetchViews() {
  const off = indexStore.updates.on(() => {
    off();
    // A failed prefetch is not an error yet: the visit imports again and says so if it fails.
    whenIdle(() => Object.keys(LAZY).forEach((name) => importView(name).catch(() => {})));
  });
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
route();
prefetchViews();
// The live feed opens once the first page is drawn: the data comes first, then the stream.
whenIdle(() => live.start());
