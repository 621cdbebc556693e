// A commit of the kernel repo: message, author and committer, parents, the submission and
// kernel it records, and the paths it changed (GET /api/commits/{id}).

import { api } from '../api.js';
import { badge, empty, failure, fill, h, loading, setTitle, time } from '../dom.js';
import { formatRelative, formatTimestamp, shortId } from '../lib/format.js';
import { links } from '../lib/route.js';

const CHANGE_TONE = { added: 'good', modified: 'info', deleted: 'bad' };

function details(c, now) {
  const row = (k, v) => [h('dt', {}, k), h('dd', {}, v ?? '—')];
  const when = (at) => (at ? time(at, `${formatTimestamp(at)} (${formatRelative(at, now)})`) : null);
  return h(
    'dl',
    { class: 'kv' },
    row('kernel', c.kernel_id ? h('a', { href: links.kernel(c.kernel_id) }, c.kernel_id) : null),
    row('submission', c.submission_id ? h('a', { class: 'mono', href: links.submission(c.submission_id) }, c.submission_id) : null),
    row('author', c.author),
    row('authored', when(c.authored_at)),
    row('committer', c.committer),
    row('committed', when(c.committed_at)),
    row('parents', c.parents?.length ? c.parents.map((p, i) => [i ? ' ' : '', h('a', { class: 'mono commit-link', href: links.commit(p), title: p }, shortId(p, 10))]) : 'none (the first commit)'),
    Object.entries(c.trailers ?? {}).map(([k, v]) => row(k, h('span', { class: 'mono' }, v))),
  );
}

function changes(list) {
  if (!list?.length) return empty('No paths changed.');
  return h('ul', { class: 'changes' }, list.map((c) => h('li', {}, badge(c.change, CHANGE_TONE[c.change] ?? 'muted'), ' ', h('span', { class: 'mono' }, c.path))));
}

export function createCommitView() {
  let controller;
  let root;

  async function load(route) {
    controller?.abort();
    controller = new AbortController();
    const id = route.params.id;
    setTitle(`commit ${shortId(id, 10)}`);
    fill(root, loading('Loading the commit'));
    let c;
    try {
      c = await api.commit(id, controller.signal);
    } catch (error) {
      if (error.name === 'AbortError') return;
      fill(root, error.code === 'unknown_commit' || error.code === 'invalid_commit_id' ? empty(`No commit ${id} in the kernel repo.`, error.message) : failure(error, () => load(route)));
      return;
    }
    const [subject, ...body] = (c.message ?? '').split('\n');
    const text = body.filter((line) => !/^Kz-[A-Za-z-]+: /.test(line)).join('\n').trim(); // the trailers are listed above
    fill(
      root,
      h('div', { class: 'page-head' }, h('nav', { class: 'crumbs', 'aria-label': 'breadcrumb' }, c.kernel_id ? h('a', { href: links.kernel(c.kernel_id) }, c.kernel_id) : h('a', { href: links.boards() }, 'boards'), ' / commit'), h('h1', {}, 'Commit ', h('span', { class: 'mono subtitle', id: 'commit-id' }, c.id)), h('p', { class: 'meta' }, subject)),
      h('div', { class: 'two' }, h('section', { class: 'card' }, h('h2', {}, 'Details'), details(c, Date.now())), h('section', { class: 'card' }, h('h2', {}, `Changed paths (${c.changes?.length ?? 0})`), changes(c.changes))),
      text ? h('section', { class: 'card' }, h('h2', {}, 'Message'), h('pre', { class: 'log' }, text)) : null,
    );
  }

  return {
    mount(container, route) {
      root = container;
      load(route);
    },
    update(route) {
      load(route);
    },
    unmount() {
      controller?.abort();
    },
  };
}
