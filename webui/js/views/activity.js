// Live activity: the event feed as it happens, queue depth per architecture, runners with
// their devices and heartbeat age, and the latest submissions.

import { api, listOf } from '../api.js';
import { badge, empty, failure, fill, h, loading, replaceKeepingFocus, setTitle, time } from '../dom.js';
import { indexStore, live } from '../live.js';
import { describeEvent } from '../lib/events.js';
import { formatDuration, formatRelative, formatTimestamp, parseTime, shortId } from '../lib/format.js';
import { normaliseRunners } from '../lib/model.js';
import { links } from '../lib/route.js';
import { statusBadge } from './submission.js';

const FEED_SHOWN = 100;
const RUNNER_REFRESH_MS = 10000;
const STALE_HEARTBEAT_MS = 60000;
// GET /api/runners' states: liveness is the API's (heartbeats are not in the log, so not in index.json).
const LIVE = new Set(['idle', 'busy']);
const RUNNER_TONE = { idle: 'good', busy: 'warn', gone: 'bad', deregistered: 'muted' };
const RUNNER_NOTE = { gone: 'no heartbeat for too long: the runner is presumed gone', deregistered: 'the runner said goodbye' };

function feedRow(message, now) {
  const e = describeEvent(message);
  const target = e.submissionId
    ? h('a', { href: links.submission(e.submissionId), class: 'mono' }, shortId(e.submissionId))
    : e.kernelId
      ? h('a', { href: links.kernel(e.kernelId), class: 'mono' }, e.kernelId)
      : h('span', { class: 'mono' }, e.runnerId ?? '');
  return h(
    'li',
    { class: `feed-row tone-${e.tone}`, 'data-seq': e.seq ?? '' },
    h('span', { class: 'mono muted seq' }, e.seq !== null ? `#${e.seq}` : ''),
    h('span', { class: 'muted when' }, time(e.at, formatRelative(e.at, now))),
    badge(`${e.aggregate}.${e.type}`, e.tone),
    h('span', { class: 'arch mono' }, e.arch ?? ''),
    target,
    h('span', { class: 'event-text' }, e.text),
  );
}

/** The index's queue plus every arch a live runner serves or a board has, at zero. */
function queueRows(index, runners) {
  const rows = new Map(index.queue.map((q) => [q.arch, q]));
  const live = Array.isArray(runners) ? runners.filter((r) => LIVE.has(r.state)) : [];
  const arches = [...live.flatMap((r) => r.arches ?? []), ...index.boards.map((b) => b.arch)];
  for (const arch of arches) if (!rows.has(arch)) rows.set(arch, { arch, queued: 0, running: 0 });
  return [...rows.values()].sort((a, b) => (a.arch < b.arch ? -1 : 1));
}

function queueCards(queue) {
  if (queue.length === 0) return empty('No architecture has work queued.');
  return h('div', { class: 'queue' }, queue.map((q) => h('div', { class: 'stat' }, h('div', { class: 'stat-label mono' }, q.arch), h('div', { class: 'stat-value' }, String(q.queued), h('span', { class: 'muted small' }, ' queued')), h('div', { class: 'stat-sub muted' }, `${q.running} running`))));
}

function runnersTable(runners, now) {
  if (runners.length === 0) return empty('No runner registered.', 'Start one with kz runner; it appears here when it registers.');
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'dense' },
      h('thead', {}, h('tr', {}, ['runner', 'arches', 'device', 'state', 'heartbeat'].map((t) => h('th', { scope: 'col' }, t)))),
      h(
        'tbody',
        {},
        runners.map((r) => {
          const beat = parseTime(r.lastHeartbeatAt);
          const age = beat === null ? null : Math.max(0, now - beat);
          const stale = age === null || age > STALE_HEARTBEAT_MS;
          return h(
            'tr',
            {},
            h('td', { class: 'mono' }, r.id),
            h('td', { class: 'mono' }, (r.arches ?? []).join(', ')),
            h('td', {}, r.device || '—'),
            h('td', {}, badge(r.state ?? 'unknown', RUNNER_TONE[r.state] ?? 'muted', RUNNER_NOTE[r.state])),
            h('td', { class: `num${stale ? ' stale' : ''}`, title: r.lastHeartbeatAt ? formatTimestamp(r.lastHeartbeatAt) : null }, age === null ? 'never' : `${formatDuration(age)} ago`),
          );
        }),
      ),
    ),
  );
}

function submissionsTable(subs, now) {
  if (subs.length === 0) return empty('No submissions yet.');
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'dense' },
      h('thead', {}, h('tr', {}, ['when', 'submission', 'kernel', 'submitter', 'status', 'reason'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, subs.map((s) => h('tr', {}, h('td', { class: 'muted nowrap' }, time(s.updated_at ?? s.created_at, formatRelative(s.updated_at ?? s.created_at, now))), h('td', { class: 'mono' }, h('a', { href: links.submission(s.submission_id) }, shortId(s.submission_id))), h('td', { class: 'mono' }, s.kernel_id ? h('a', { href: links.kernel(s.kernel_id) }, s.kernel_id) : '—'), h('td', { class: 'nowrap' }, s.submitter_id ?? '—'), h('td', {}, statusBadge(s.status)), h('td', { class: 'reason' }, s.result?.reason ?? s.error?.message ?? '')))),
    ),
  );
}

export function createActivityView() {
  let controller;
  let slots;
  let runners = null;
  let subs = null;
  const offs = [];
  let ticker;
  let poller;
  let runnerTimer;

  function renderFeed() {
    const now = Date.now();
    const shown = live.feed.slice(0, FEED_SHOWN);
    const stateText = { open: 'connected', connecting: 'connecting…', closed: 'disconnected', idle: 'not connected' }[live.state];
    replaceKeepingFocus(slots.feedState, badge(stateText, live.state === 'open' ? 'good' : 'warn'), h('span', { class: 'muted' }, live.lastSeq !== null ? ` last event #${live.lastSeq}` : ''));
    replaceKeepingFocus(slots.feed, shown.length ? h('ol', { class: 'feed', 'aria-label': 'live events, newest first' }, shown.map((m) => feedRow(m, now))) : empty('Waiting for events…', 'New submissions, claims, results and commits appear here as they happen.'));
  }

  /** Runners from GET /api/runners only: it alone knows their heartbeats. */
  function renderRunners() {
    if (runners instanceof Error) return fill(slots.runners, failure(runners, () => loadRunners()));
    fill(slots.runners, runners ? runnersTable(runners, Date.now()) : loading('Loading runners'));
  }

  function renderSide() {
    const now = Date.now();
    const index = indexStore.index;
    fill(slots.queue, index ? queueCards(queueRows(index, runners instanceof Error ? null : runners)) : indexStore.error ? failure(indexStore.error, () => indexStore.load()) : loading('Loading the queue'));
    renderRunners();
    replaceKeepingFocus(slots.subs, subs instanceof Error ? failure(subs, () => loadSubs()) : subs ? submissionsTable(subs, now) : loading('Loading submissions'));
  }

  async function loadRunners() {
    try {
      const body = await api.runners(controller.signal);
      runners = normaliseRunners(listOf(body, 'runners'));
    } catch (error) {
      if (error.name === 'AbortError') return;
      runners = error; // said as such: the index's runners know nothing of liveness
    }
    renderSide();
  }

  async function loadSubs() {
    try {
      subs = listOf(await api.submissions({ limit: 25 }, controller.signal), 'submissions');
    } catch (error) {
      if (error.name === 'AbortError') return;
      subs = error;
    }
    renderSide();
  }

  return {
    mount(root) {
      controller = new AbortController();
      setTitle('activity');
      slots = { feedState: h('span'), feed: h('div'), queue: h('div'), runners: h('div'), subs: h('div') };
      fill(root, 
        h('div', { class: 'page-head' }, h('h1', {}, 'Live activity')),
        h('div', { class: 'two activity' }, h('section', { class: 'card feed-card' }, h('h2', {}, 'Events ', slots.feedState), slots.feed), h('div', {}, h('section', { class: 'card' }, h('h2', {}, 'Queue per architecture'), slots.queue), h('section', { class: 'card' }, h('h2', {}, 'Runners'), slots.runners))),
        h('section', { class: 'card' }, h('h2', {}, 'Latest submissions'), slots.subs),
      );
      offs.push(live.messages.on(() => {
        renderFeed();
        clearTimeout(runnerTimer);
        runnerTimer = setTimeout(() => (loadRunners(), loadSubs()), 500);
      }));
      offs.push(live.states.on(() => renderFeed()));
      offs.push(indexStore.updates.on(() => renderSide()));
      renderFeed();
      renderSide();
      if (!indexStore.index) indexStore.load();
      loadRunners();
      loadSubs();
      ticker = setInterval(() => renderRunners(), 1000);
      poller = setInterval(() => loadRunners(), RUNNER_REFRESH_MS);
    },
    update() {},
    unmount() {
      controller.abort();
      offs.splice(0).forEach((off) => off());
      clearInterval(ticker);
      clearInterval(poller);
      clearTimeout(runnerTimer);
    },
  };
}
