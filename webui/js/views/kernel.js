// The kernel page: description, scoreboard, history chart, workloads, correctness,
// environment, attempts and the package's files.

import { api, kernelPath, listOf } from '../api.js';
import { badge, empty, failure, fill, h, loading, setTitle, time } from '../dom.js';
import { indexStore } from '../live.js';
import { chooseScale, describeMetric, formatBytes, formatNumber, formatRelative, formatScaled, formatScore, formatSpread, shortId } from '../lib/format.js';
import { withIntervals } from '../lib/chart.js';
import { knownResults, locateKernel, samplesOf, scoreboardEntry, workloadParams } from '../lib/model.js';
import { problemFacts } from '../lib/problem.js';
import { links } from '../lib/route.js';
import { standingNote } from '../lib/status.js';
import { STATUS } from '../lib/vocab.js';
import { historyChart } from './chart.js';
import { confirmationBadge, suspectBadge, unreviewedBadge } from './review.js';
import { commitLink, provenanceView, statusBadge, submissionLink } from './submission.js';

function section(title, ...content) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...content);
}

function stat(label, value, sub) {
  return h('div', { class: 'stat' }, h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), sub ? h('div', { class: 'stat-sub muted' }, sub) : null);
}

function dl(obj) {
  const entries = Object.entries(obj ?? {}).filter(([, v]) => v !== null && v !== undefined && v !== '');
  if (entries.length === 0) return h('p', { class: 'muted' }, 'Not reported.');
  return h('dl', { class: 'kv' }, entries.map(([k, v]) => [h('dt', {}, k), h('dd', {}, typeof v === 'object' ? JSON.stringify(v) : String(v))]));
}

/** Where an imported board's problem came from, and its licence's conditions on use. */
function problemSection(desc) {
  const problem = problemFacts(desc);
  if (!problem) return null;
  return h(
    'section',
    { class: 'card problem-set', 'aria-label': 'imported problem' },
    h('h2', {}, `Imported from ${problem.set}`),
    problem.conditions ? h('p', { class: 'licence-conditions', role: 'note' }, h('strong', {}, 'Licence with conditions: '), problem.conditions) : null,
    h('dl', { class: 'kv' }, problem.facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))])),
  );
}

function workloadsTable(desc, score, current, scale) {
  const declared = desc.workloads ?? [];
  const names = [...new Set([...declared.map((w) => w.name), ...(score?.workloads ?? []).map((w) => w.name)])];
  if (names.length === 0) return h('p', { class: 'muted' }, 'No workloads declared.');
  const find = (list, name) => (list ?? []).find((w) => w.name === name);
  const params = (w) => workloadParams(w).map(([k, v]) => `${k}=${v}`).join(' ');
  const unit = scale.unit ? ` (${scale.unit})` : '';
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'dense' },
      // A workload's value is the median of its samples: one column for both.
      h('thead', {}, h('tr', {}, ['workload', 'params', `best${unit}`, 'p10', 'p90', 'stdev', 'samples', `current${unit}`].map((c, i) => h('th', { scope: 'col', class: i >= 2 ? 'num' : null, title: i === 2 ? "the best result's median" : null }, c)))),
      h(
        'tbody',
        {},
        names.map((name) => {
          const b = find(score?.workloads, name);
          const s = b?.stats ?? {};
          const c = find(current?.workloads, name);
          return h(
            'tr',
            {},
            h('td', { class: 'mono' }, name),
            h('td', { class: 'mono muted small' }, params(find(declared, name)) || '—'),
            h('td', { class: 'num strong' }, formatScaled(b?.value, scale)),
            ['p10', 'p90', 'stdev'].map((k) => h('td', { class: 'num' }, formatScaled(s[k], scale))),
            h('td', { class: 'num' }, samplesOf(s)),
            h('td', { class: 'num' }, formatScaled(c?.value, scale)),
          );
        }),
      ),
    ),
  );
}

function correctness(c) {
  if (!c) return h('p', { class: 'muted' }, 'No correctness report yet.');
  const checks = c.checks ?? [];
  return [
    h('p', {}, c.passed ? badge('passed', 'good') : badge('failed', 'bad'), ` ${checks.length} check${checks.length === 1 ? '' : 's'}`),
    checks.length
      ? h('div', { class: 'table-wrap' }, h('table', { class: 'dense' }, h('thead', {}, h('tr', {}, ['check', 'max abs err', 'max rel err', 'atol', 'rtol', ''].map((t, i) => h('th', { scope: 'col', class: i && i < 5 ? 'num' : null }, t)))), h('tbody', {}, checks.map((k) => h('tr', {}, h('td', { class: 'mono' }, k.name), ['max_abs_err', 'max_rel_err', 'atol', 'rtol'].map((f) => h('td', { class: 'num' }, typeof k[f] === 'number' ? k[f].toExponential(1) : '—')), h('td', {}, k.passed ? badge('ok', 'good') : badge('fail', 'bad')))))))
      : null,
  ];
}

/**
 * Why an attempt ended as it did: a failure's error (its status says failed), else the judge's
 * reason; a confirmation run names the result it measured again.
 */
function attemptReason(s) {
  const text = s.error && (s.status === STATUS.FAILED || s.status === STATUS.CANCELLED) ? `${s.error.code}: ${s.error.message}` : s.result?.reason ?? s.error?.message ?? '—';
  if (!s.confirms) return text;
  return [h('span', { class: 'muted' }, 'confirms '), submissionLink(s.confirms, 'mono confirms-link'), ` — ${text}`];
}

/** An attempt's confirmation mark, linking its confirmation run (a result that was run again). */
function attemptMark(s) {
  const c = s.confirmation;
  return c ? [' ', confirmationBadge(c.mark, { href: links.submission(c.submission_id), extra: c.reason ?? '' })] : null;
}

function attemptsTable(subs, scale, now) {
  if (subs.length === 0) return empty('No submissions yet for this kernel.');
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'dense' },
      h('thead', {}, h('tr', {}, ['when', 'submission', 'submitter', 'status', `value${scale.unit ? ` (${scale.unit})` : ''}`, 'reason', 'commit'].map((t) => h('th', { scope: 'col', class: t.startsWith('value') ? 'num' : null }, t)))),
      h(
        'tbody',
        {},
        subs.map((s) =>
          h(
            'tr',
            {},
            h('td', { class: 'muted nowrap' }, time(s.updated_at ?? s.created_at, formatRelative(s.updated_at ?? s.created_at, now))),
            h('td', { class: 'mono' }, h('a', { href: links.submission(s.submission_id) }, shortId(s.submission_id))),
            h('td', { class: 'nowrap' }, s.submitter_id ?? '—', s.provenance ? h('div', { class: 'muted small' }, provenanceView(s.provenance)) : null),
            h('td', { class: 'nowrap' }, statusBadge(s.status), suspectBadge(s.suspect), attemptMark(s)),
            h('td', { class: 'num' }, formatScaled(s.result?.metric_value ?? s.result?.value, scale)),
            h('td', { class: 'reason' }, attemptReason(s)),
            h('td', { class: 'mono muted' }, commitLink(s.commits?.source, 10) ?? '—'),
          ),
        ),
      ),
    ),
  );
}

/** The package's files ([{path, size}]) with the URL that serves each one's content. */
function fileList(id, files) {
  return (files ?? [])
    .map((f) => ({ ...f, url: f.url ?? `/api/kernels/${kernelPath(id)}/files/${kernelPath(f.path)}` }))
    .sort((a, b) => (a.path < b.path ? -1 : 1));
}

function filesBrowser(id, files, signal) {
  const list = fileList(id, files);
  if (list.length === 0) return h('p', { class: 'muted' }, 'No files listed.');
  const viewer = h('pre', { class: 'file-view', tabindex: 0, 'aria-label': 'file content' });
  const label = h('div', { class: 'file-name mono' });
  const buttons = [];
  async function open(file, button) {
    buttons.forEach((b) => b.setAttribute('aria-pressed', String(b === button)));
    label.textContent = `${file.path}${Number.isFinite(file.size) ? ` · ${formatBytes(file.size)}` : ''}`;
    if (typeof file.content === 'string') return (viewer.textContent = file.content);
    if (!file.url) return (viewer.textContent = '(content not provided by the API)');
    viewer.textContent = 'Loading…';
    try {
      viewer.textContent = await api.text(file.url, signal);
    } catch (error) {
      viewer.textContent = `Could not load ${file.path}: ${error.message}`;
    }
  }
  const nav = h('ul', { class: 'file-list', 'aria-label': 'package files' }, list.map((f) => {
    const b = h('button', { type: 'button', class: 'file-btn mono', 'aria-pressed': 'false', onclick: () => open(f, b) }, f.path);
    buttons.push(b);
    return h('li', {}, b);
  }));
  const first = list.find((f) => f.path.endsWith('desc.yaml')) ?? list[0];
  open(first, buttons[list.indexOf(first)]);
  return h('div', { class: 'files' }, nav, h('div', { class: 'file-pane' }, label, viewer));
}

function commitsSection(commits, now) {
  if (!commits?.length) return null;
  return section(
    'Commits on main',
    h('ul', { class: 'commits' }, commits.map((c) => h('li', {}, commitLink(c.id, 10), ' ', h('span', {}, c.message.split('\n')[0]), h('span', { class: 'muted' }, ' · ', time(c.at, formatRelative(c.at, now)))))),
  );
}

function header(id, desc, located, board) {
  const [arch, op, sub, quant, name] = id.split('/');
  const group = `${arch}/${op}/${sub}/${quant}`;
  return h(
    'div',
    { class: 'page-head' },
    h('nav', { class: 'crumbs', 'aria-label': 'breadcrumb' }, h('a', { href: links.boards() }, 'boards'), ' / ', h('a', { href: links.board(group) }, group), board?.reviewed === false ? unreviewedBadge() : null, ' / ', name),
    h('h1', {}, name, desc.title ? h('span', { class: 'subtitle' }, desc.title) : null),
    h('p', { class: 'meta' }, desc.language ? badge(desc.language, 'lang') : null, located?.kernel.disqualified ? badge('disqualified', 'bad', located.kernel.dqReason) : null, located?.kernel.suspect && !located.kernel.disqualified ? h('span', { class: 'badge tone-warn suspect', title: 'its current result is marked suspect: held back from any rank, and never shown confirmed, until a maintainer clears it' }, 'suspect') : null, (desc.tags ?? []).map((t) => badge(t, 'muted')), desc.authors?.length ? h('span', { class: 'muted' }, ` by ${desc.authors.map((a) => (typeof a === 'string' ? a : a.name)).join(', ')}`) : null, desc.license ? h('span', { class: 'muted' }, ` · ${desc.license}`) : null),
  );
}

/** The score stat: ratio and interval, the basis when not side by side, against the reference. */
function scoreStat(entry, board) {
  const s = entry?.score ?? null;
  const { ratio, interval } = formatScore(s);
  const reference = board?.referenceId ? board.referenceId.split('/')[4] : null;
  const basis = { side_by_side: 'measured side by side', reference: 'the pinned reference', absolute: '≈ estimate from absolute values' }[s?.basis] ?? '';
  const value = s ? `${s.basis === 'absolute' ? '≈ ' : ''}${ratio}` : '—';
  return stat('speed-up', h('span', { class: 'score' }, value, interval ? h('span', { class: 'interval muted small' }, ` (${interval})`) : null), reference ? `over ${reference}${basis ? ` · ${basis}` : ''}` : 'no reference');
}

/**
 * A result's confirmation mark (index.json's, by submission) as a badge, linking its
 * confirmation run where the attempts list names it.
 */
function markOf(result, known, subs) {
  const sid = result?.submission_id ?? result?.submission;
  const mark = known.find((k) => k.submission === sid)?.confirmation;
  if (!sid || !mark) return null;
  const doc = subs.find((s) => s.submission_id === sid)?.confirmation ?? null;
  const runId = doc?.submission_id ?? subs.find((s) => s.confirms === sid)?.submission_id ?? null;
  return [' ', confirmationBadge(mark, { href: runId ? links.submission(runId) : null, extra: doc?.reason ?? '' })];
}

function stats(metric, best, current, scoreboard, located, scale, now, known, subs) {
  const entry = located?.entry;
  const value = (s) => (s ? `${formatScaled(s.value, scale)} ${scale.unit}` : '—');
  const device = entry?.device ? ` · on ${entry.device}` : '';
  return h(
    'div',
    { class: 'stats' },
    stat('best', h('span', {}, value(best), markOf(best, known, subs)), best ? `${formatSpread(best.p10, best.p90, best.value)} · ${best.submitter ?? '?'} · ${formatRelative(best.at, now)}${device}` : 'no accepted result yet'),
    stat('current', h('span', {}, value(current), markOf(current, known, subs)), current ? `${current.submitter ?? '?'} · ${formatRelative(current.at, now)}` : null),
    stat('rank', entry?.rank ? h('span', {}, `#${entry.rank} `, entry.tie ? h('span', { class: 'tie', title: `shares rank ${entry.rank}: the speed-ups' settled 95 % intervals overlap` }, 'tie') : null) : h('span', { class: 'unranked' }, '—'), [located?.board ? `of ${located.board.entries.length} on ${located.board.key}` : null, standingNote(entry)].filter(Boolean).join(' · ') || null),
    scoreStat(entry, located?.board),
    stat('accepted', formatNumber(scoreboard.accepted_count ?? located?.kernel.acceptedCount ?? 0), describeMetric(metric, scale.unit)),
  );
}

export function createKernelView() {
  let controller;
  let root;

  async function load(route) {
    controller?.abort();
    controller = new AbortController();
    const { signal } = controller;
    const id = route.params.id;
    setTitle(id);
    fill(root, loading(`Loading ${id}`));
    let detail, history, subs;
    try {
      [detail, history, subs] = await Promise.all([
        api.kernel(id, signal),
        api.benchHistory(id, signal).catch((e) => (e.status === 404 ? { history: [] } : Promise.reject(e))),
        api.submissions({ kernel_id: id, limit: 50 }, signal).then((b) => listOf(b, 'submissions')),
        indexStore.index ? null : indexStore.load(),
      ]);
    } catch (error) {
      if (error.name === 'AbortError') return;
      fill(root, error.code === 'unknown_kernel' ? empty(`No kernel ${id}.`, 'Check the id, or open the boards to find it.') : failure(error, () => load(route)));
      return;
    }
    render(id, detail, history, subs, signal);
  }

  function render(id, detail, history, subs, signal) {
    const desc = detail.desc ?? {};
    const scoreboard = detail.scoreboard ?? detail.bench_result ?? {};
    const metric = { name: 'value', better: 'lower', unit: '', ...(desc.metric ?? scoreboard.metric ?? history.metric ?? {}) };
    const best = scoreboardEntry(scoreboard.best);
    const current = scoreboardEntry(scoreboard.current);
    const located = indexStore.index ? locateKernel(indexStore.index, id) : null;
    const known = knownResults(located?.kernel);
    const points = withIntervals(listOf(history, 'history').filter((p) => !p.disqualified), known, metric.better);
    const scale = chooseScale([best?.value, current?.value, ...points.map((p) => p.value)].filter(Number.isFinite), metric.unit);
    const now = Date.now();
    fill(root, 
      header(id, desc, located, detail.board),
      detail.source === 'submission' ? h('p', { class: 'state pending-kernel' }, h('strong', {}, 'Not on main yet. '), `No submission for ${id} has been accepted; what is shown comes from its latest submission's package and its attempts.`) : null,
      stats(metric, best, current, scoreboard, located, scale, now, known, subs),
      desc.description ? h('section', { class: 'card prose' }, h('h2', {}, 'Description'), h('p', { class: 'description' }, desc.description)) : null,
      problemSection(desc),
      section(`Accepted results over time (${points.length})`, points.length ? historyChart(points, { metric, scale, onPick: (p) => p.submission_id && (location.hash = links.submission(p.submission_id)) }) : empty('No accepted result yet.', 'The chart fills in as results are accepted.')),
      section('Workloads', workloadsTable(desc, best, current, scale)),
      h('div', { class: 'two' }, section('Correctness', correctness(scoreboard.correctness ?? best?.correctness)), section('Environment', dl(scoreboard.environment ?? best?.environment))),
      section(`Attempts (${subs.length})`, attemptsTable(subs, scale, now)),
      section(`Files (${(detail.files ?? []).length})`, filesBrowser(id, detail.files, signal)),
      commitsSection(detail.commits, now),
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
