// The submission page: status, timeline of events, result and workloads, log; follows a
// running submission through the live feed.

import { provenanceParts } from '../lib/provenance.js';
import { api, listOf } from '../api.js';
import { badge, empty, failure, fill, h, loading, setTitle, time } from '../dom.js';
import { live } from '../live.js';
import { TERMINAL, describeEvent, flattenSubmission, timeline } from '../lib/events.js';
import { chooseScale, formatBytes, formatInterval, formatRelative, formatScaled, formatSpeedup, formatTimestamp, shortId } from '../lib/format.js';
import { samplesOf } from '../lib/model.js';
import { links } from '../lib/route.js';
import { comparisonOf } from '../lib/verdict.js';
import { confirmationMark, markOfRun, statusLook } from '../lib/status.js';
import { STATUS } from '../lib/vocab.js';
import { confirmationBadge, suspectBadge, suspectReasons } from './review.js';

const { ACCEPTED, COMMITTED, REJECTED, CONFIRMED, DISPUTED } = STATUS;
const MEASURED = new Set([ACCEPTED, COMMITTED, REJECTED]); // statuses whose run was measured and judged
const FALLBACK_MS = 5000; // re-read a running submission this often while the live feed is down

/** A badge for a submission status: its tone and, as tooltip, what it means (lib/status.js). */
export function statusBadge(status) {
  const { tone, note } = statusLook(status);
  return badge(status ?? 'unknown', tone, note);
}

/** A link to a submission's page, by its short id. */
export function submissionLink(id, cls = 'mono') {
  return h('a', { class: cls, href: links.submission(id), title: id }, shortId(id));
}

/**
 * The confirmation box. A confirmation run says which result it measures again (a link) and,
 * once it ended, whether it agreed and why; a result that was run again says what its run
 * found, with a link to it. Null for a submission that is neither.
 */
function confirmationSection(d) {
  if (d.confirms) {
    const ended = d.status === CONFIRMED || d.status === DISPUTED;
    const reason = d.result?.reason ?? d.result_document?.reason ?? null;
    const verdict = ended ? [statusBadge(d.status), ` the second run ${d.status === CONFIRMED ? 'agrees' : 'disagrees'}`, reason ? h('span', { class: 'reason' }, ` — ${reason}`) : null] : unendedRun(d);
    return h(
      'section',
      { class: 'card confirmation', 'data-confirms': d.confirms },
      h('h2', {}, 'Confirmation run'),
      h('p', {}, 'A confirmation run of ', submissionLink(d.confirms, 'mono confirms-link'), ": a result that took rank 1 on its board, its package measured a second time (preferably on another runner) before the board calls it a record. It is never accepted: it ends confirmed (its score agrees with the result's) or disputed (the result is then not ranked first)."),
      h('p', { class: 'verdict' }, verdict),
    );
  }
  const c = d.confirmation;
  if (!c) return null;
  const look = confirmationMark(c.mark ?? markOfRun(c.status));
  return h(
    'section',
    { class: 'card confirmation', 'data-confirmation': look?.mark ?? '' },
    h('h2', {}, 'Confirmation'),
    h('p', {}, `This result took rank 1 on its board and ${TERMINAL.has(c.status) ? 'was' : 'is being'} measured a second time by the confirmation run `, submissionLink(c.submission_id, 'mono confirmation-link'), ` (${c.status}).`),
    h('p', { class: 'verdict' }, confirmationBadge(look?.mark, { href: links.submission(c.submission_id) }), look ? ` ${look.line}` : null, c.reason ? h('span', { class: 'reason' }, ` — ${c.reason}`) : null),
  );
}

/** What an open or failed confirmation run says in place of a verdict. */
function unendedRun(d) {
  if (!TERMINAL.has(d.status)) return [statusBadge(d.status), ' not ended yet: the result stays unconfirmed until it does'];
  return [statusBadge(d.status), ' it ended without a verdict: the result stays unconfirmed', d.error?.message ? h('span', { class: 'reason' }, ` — ${d.error.message}`) : null];
}

/** A commit id as a link to its page (the full id as tooltip), or null. */
export function commitLink(id, length = 40) {
  if (!id) return null;
  return h('a', { class: 'mono commit-link', href: links.commit(id), title: id }, length < 40 ? shortId(id, length) : id);
}

/** Who made it (agent, model, tokens, cost, transcript link), as its submitter said. */
export function provenanceView(p) {
  const parts = provenanceParts(p);
  if (parts.length === 0) return null;
  return h(
    'span',
    { class: 'provenance' },
    parts.flatMap((part, i) => [
      i ? ' · ' : null,
      part.href ? h('a', { href: part.href, rel: 'noopener noreferrer nofollow', target: '_blank' }, part.text) : h('span', { title: part.label }, part.label === 'agent' || part.label === 'model' ? part.text : `${part.label} ${part.text}`),
    ]),
  );
}

function meta(d, now) {
  const row = (k, v) => [h('dt', {}, k), h('dd', {}, v ?? '—')];
  return h(
    'dl',
    { class: 'kv' },
    row('kernel', d.kernel_id ? h('a', { href: links.kernel(d.kernel_id) }, d.kernel_id) : null),
    row('submitter', d.submitter_id),
    d.provenance ? row('made by', provenanceView(d.provenance)) : null,
    d.confirms ? row('confirms', h('span', {}, submissionLink(d.confirms), h('span', { class: 'muted' }, ' (a confirmation run: that result measured again)'))) : null,
    d.confirmation ? row('confirmation', h('span', {}, confirmationBadge(d.confirmation.mark, { href: links.submission(d.confirmation.submission_id) }), ' run ', submissionLink(d.confirmation.submission_id))) : null,
    d.message ? row('message', d.message) : null,
    d.queue_position ? row('queue position', `#${d.queue_position}`) : null,
    d.disqualified ? row('disqualified', h('span', { class: 'reason' }, d.disqualified)) : null,
    d.suspect ? row('suspect', h('div', {}, suspectBadge(d.suspect), d.suspect.cleared_reason ? h('span', { class: 'reason' }, ` ${d.suspect.cleared_reason}`) : null, suspectReasons(d.suspect))) : null,
    row('attempt', d.attempt ? String(d.attempt) : null),
    row('runner', d.runner_id),
    row('created', d.created_at ? time(d.created_at, `${formatTimestamp(d.created_at)} (${formatRelative(d.created_at, now)})`) : null),
    row('updated', d.updated_at ? time(d.updated_at, `${formatTimestamp(d.updated_at)} (${formatRelative(d.updated_at, now)})`) : null),
    row('source commit', commitLink(d.commits?.source)),
    row('bench-result commit', commitLink(d.commits?.bench_result)),
    row('package', d.package_digest ? h('span', { class: 'mono', title: d.package_digest }, `${shortId(d.package_digest, 12)}${Number.isFinite(d.package_size) ? ` · ${formatBytes(d.package_size)}` : ''}`) : null),
    d.base_commit ? row('base commit', commitLink(d.base_commit)) : null,
    row('log version', d.version !== undefined ? h('span', { class: 'mono' }, `#${d.version}`) : null),
  );
}

function timelineList(d) {
  const rows = timeline(listOf(d, 'events'), d);
  if (rows.length === 0) return empty('No events yet.');
  return h(
    'ol',
    { class: 'timeline' },
    rows.map((e) => h('li', { class: `tone-${e.tone}` }, h('span', { class: 'dot', 'aria-hidden': 'true' }), h('span', { class: 'mono muted seq' }, e.seq !== null ? `#${e.seq}` : ''), h('strong', {}, e.type), h('span', { class: 'muted' }, ' · ', time(e.at, formatTimestamp(e.at)), e.actor ? ` · ${e.actor}` : ''), h('div', { class: 'event-text' }, e.text))),
  );
}

/**
 * The result box. Its badge is the submission's status, the one the header shows: the judge's
 * own verdict in the document (`accepted`) is what the platform then decided on, not a second
 * status (a document the referee refused is `failed`, whatever the judge said).
 */
function resultSection(d, result, best) {
  if (!result) return empty('No result yet.', 'The result appears when a runner reports it.');
  const metric = result.metric ?? {};
  const value = metric.value ?? result.value;
  const comparison = comparisonOf(result, best);
  const values = [value, ...(result.workloads ?? []).map((w) => w.value), ...(comparison?.rows ?? []).map((r) => r.other)];
  const scale = chooseScale(values.filter(Number.isFinite), metric.unit ?? result.unit);
  const workloads = result.workloads ?? [];
  const shown = Number.isFinite(value) ? `${formatScaled(value, scale)} ${scale.unit ?? ''}` : 'no value';
  return [
    h('p', { class: 'verdict' }, TERMINAL.has(d.status) ? statusBadge(d.status) : null, ' ', h('span', { class: 'big mono' }, shown), metric.name ? h('span', { class: 'muted' }, ` ${metric.name}`) : null, result.reason ? h('span', { class: 'reason' }, ` — judge: ${result.reason}`) : null),
    comparisonTable(comparison, scale),
    workloadTable(workloads, scale),
    ceilingsLine(result.ceilings),
    result.correctness ? h('p', {}, 'correctness: ', result.correctness.passed ? badge('passed', 'good') : badge('failed', 'bad'), ` ${(result.correctness.checks ?? []).map((c) => `${c.name}${c.passed ? '' : ' ✗'}`).join(', ')}`) : null,
    result.environment ? h('p', { class: 'muted small mono' }, Object.entries(result.environment).map(([k, v]) => `${k}: ${v}`).join(' · ')) : null,
  ];
}

/**
 * Each workload's statistics and, where the benchmark declares the work a call must do, its
 * physical floor at the device's measured ceilings and how near the median came to it.
 */
function workloadTable(workloads, scale) {
  if (!workloads.length) return null;
  const floors = workloads.some((w) => Number.isFinite(w.floor?.value));
  const heads = [['workload', null], [`value (${scale.unit})`, 'the median of the samples'], ['p10', null], ['p90', null], ['stdev', null], ['samples', null], ...(floors ? [[`floor (${scale.unit})`, 'the least time the declared work takes at the measured ceilings'], ['of floor', 'the floor over the median: 100 % is at the ceiling']] : [])];
  const attained = (w) => (Number.isFinite(w.floor?.attained) ? `${(100 * w.floor.attained).toFixed(w.floor.attained < 0.1 ? 1 : 0)} %` : '—');
  const cells = (w) => [
    h('td', { class: 'mono' }, w.name),
    h('td', { class: 'num strong' }, formatScaled(w.value, scale)),
    ...['p10', 'p90', 'stdev'].map((k) => h('td', { class: 'num' }, formatScaled(w.stats?.[k], scale))),
    h('td', { class: 'num' }, samplesOf(w.stats)),
    ...(floors ? [h('td', { class: 'num', title: w.floor ? `${w.floor.bound}-bound` : null }, w.floor ? `${formatScaled(w.floor.value, scale)} ${w.floor.bound === 'compute' ? 'FLOP' : 'mem'}` : '—'), h('td', { class: 'num' }, attained(w))] : []),
  ];
  return h('div', { class: 'table-wrap' }, h('table', { class: 'dense workloads' },
    h('thead', {}, h('tr', {}, heads.map(([text, title], i) => h('th', { scope: 'col', class: i ? 'num' : null, title }, text)))),
    h('tbody', {}, workloads.map((w) => h('tr', {}, cells(w)))),
  ));
}

/** The ceilings the floors were taken against, as the judge's trusted worker measured them. */
function ceilingsLine(c) {
  if (!c || !Number.isFinite(c.bytes_per_s) || !Number.isFinite(c.flops_per_s)) return null;
  const rate = (x, unit) => (x >= 1e12 ? `${(x / 1e12).toFixed(2)} T${unit}` : `${(x / 1e9).toFixed(1)} G${unit}`);
  return h('p', { class: 'muted small ceilings' }, `floors at the measured ceilings of ${c.device ?? 'the device'}: copy ${rate(c.bytes_per_s, 'B/s')}, ${c.dtype ?? ''} product ${rate(c.flops_per_s, 'FLOP/s')}`);
}

function interval(pair) {
  return pair ? formatInterval(pair[0], pair[1]) : '—';
}

const HEADINGS = {
  incumbent: 'Side by side with the incumbent',
  reference: "Side by side with the board's reference",
  best: 'Against the current best',
};

/** The overall figures: the verdict against the incumbent (or the best), and the score. */
function overall(c) {
  const speed = (x) => formatSpeedup(x);
  const verdict = c.speedup !== null ? `overall ${speed(c.speedup)}${c.interval ? ` (interval ${interval(c.interval)})` : ''}${c.outcome ? ` · ${c.outcome.replaceAll('_', ' ')}` : ''}` : null;
  const score = c.score ? `score ${speed(c.score.speedup)}${c.score.interval ? ` (interval ${interval(c.score.interval)})` : ''} over the board's reference` : null;
  return [verdict, score].filter(Boolean).map((line, i) => h('p', { class: `muted small${i && verdict ? ' score-line' : ''}` }, line));
}

/**
 * Per workload: this run, what it was set against (the incumbent, or the board's best), and
 * the speed-up with its interval; the board's reference and the speed-up over it beside them
 * where the judge measured it.
 */
function comparisonTable(c, scale) {
  if (!c) return null;
  const speed = (x) => (x === null ? '—' : formatSpeedup(x));
  const tone = (x) => (x === null ? '' : x > 1 ? ' up' : x < 1 ? ' down' : '');
  const them = c.against === 'best' ? 'current best' : 'incumbent';
  const own = c.against !== 'reference';
  const heads = [['workload', null], [`this run (${scale.unit})`, null], ...(own ? [[`${them} (${scale.unit})`, null], ['speed-up', `over the ${them}`], ['interval', '95 %']] : []), ...(c.withReference ? [[`reference (${scale.unit})`, "the board's pinned reference, measured beside this run"], ['vs reference', 'speed-up over the reference'], ['interval', '95 %']] : [])];
  const cells = (r) => [
    h('td', { class: 'mono' }, r.name),
    h('td', { class: 'num strong' }, formatScaled(r.value, scale)),
    ...(own ? [h('td', { class: 'num' }, formatScaled(r.other, scale)), h('td', { class: `num${tone(r.speedup)}` }, speed(r.speedup)), h('td', { class: 'num muted' }, interval(r.interval))] : []),
    ...(c.withReference ? [h('td', { class: 'num col-reference' }, formatScaled(r.reference, scale)), h('td', { class: `num${tone(r.referenceSpeedup)}` }, speed(r.referenceSpeedup)), h('td', { class: 'num muted' }, interval(r.referenceInterval))] : []),
  ];
  return h(
    'div',
    { class: 'comparison' },
    h('h3', {}, c.withReference && c.against === 'incumbent' ? "Side by side with the incumbent and the board's reference" : HEADINGS[c.against]),
    overall(c),
    h('div', { class: 'table-wrap' }, h('table', { class: 'dense compare' },
      h('thead', {}, h('tr', {}, heads.map(([text, title], i) => h('th', { scope: 'col', class: i ? 'num' : null, title }, text)))),
      h('tbody', {}, c.rows.map((r) => h('tr', {}, cells(r)))),
    )),
  );
}

/** The board's best to set a run against when its judge measured no incumbent (null: none). */
async function bestFor(d, doc, signal) {
  const measured = (doc?.workloads ?? []).filter((w) => Number.isFinite(w.value));
  if (!MEASURED.has(d.status) || measured.length === 0 || measured.some((w) => w.incumbent || w.reference)) return null;
  try {
    const best = (await api.kernel(d.kernel_id, signal))?.scoreboard?.best ?? null;
    return best && best.submission_id !== d.submission_id ? best : null;
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    return null; // a new kernel has no best to compare with
  }
}

function logUrl(d) {
  if ('log_url' in d) return d.log_url || null;
  return TERMINAL.has(d.status) && d.attempt ? `/api/submissions/${encodeURIComponent(d.submission_id)}/logs` : null;
}

export function createSubmissionView() {
  let root;
  let controller;
  let id;

  async function fetchAndRender(signal) {
    const d = flattenSubmission(await api.submission(id, signal));
    const url = logUrl(d);
    const log = url ? await api.logs(url, signal).catch((e) => (e.name === 'AbortError' ? Promise.reject(e) : `(log unavailable: ${e.message})`)) : null;
    render(d, log, await bestFor(d, d.result_document, signal));
    return d;
  }

  function render(d, log, best) {
    const now = Date.now();
    const following = !TERMINAL.has(d.status);
    setTitle(`submission ${shortId(id)}`, d.status);
    const scroll = window.scrollY;
    fill(root, 
      h('div', { class: 'page-head' }, h('nav', { class: 'crumbs', 'aria-label': 'breadcrumb' }, h('a', { href: links.activity() }, 'activity'), ' / submission'), h('h1', {}, 'Submission ', h('span', { class: 'mono subtitle' }, d.submission_id ?? id)), h('p', { class: 'meta', 'aria-live': 'polite' }, h('span', { id: 'sub-status' }, statusBadge(d.status)), suspectBadge(d.suspect), d.confirmation ? confirmationBadge(d.confirmation.mark, { href: links.submission(d.confirmation.submission_id) }) : null, following ? h('span', { class: 'live-note muted' }, h('span', { class: 'pulse', 'aria-hidden': 'true' }), ' following live') : null, d.error?.message ? h('span', { class: 'reason' }, ` ${d.error.code ? `${d.error.code}: ` : ''}${d.error.message}`) : null)),
      h('div', { class: 'two' }, h('section', { class: 'card' }, h('h2', {}, 'Details'), meta(d, now)), h('section', { class: 'card' }, h('h2', {}, 'Timeline'), timelineList(d))),
      confirmationSection(d),
      h('section', { class: 'card' }, h('h2', {}, 'Result'), resultSection(d, d.result_document ?? d.result, best)),
      h('section', { class: 'card' }, h('h2', {}, 'Log'), log !== null ? h('pre', { class: 'log', tabindex: 0 }, log || '(empty log)') : empty(following ? 'The log appears when the run ends.' : 'No log for this submission.')),
    );
    if (window.scrollY !== scroll) window.scrollTo(0, scroll);
  }

  /**
   * Follow a submission that has not ended: re-read it when the live feed carries one of its
   * events, and every 5 s while the feed is not open; stop at a terminal status.
   */
  function follow(d, signal) {
    let status = d.status;
    let soon = null;
    async function refresh() {
      if (signal.aborted || TERMINAL.has(status)) return;
      try {
        status = (await fetchAndRender(signal)).status;
      } catch (error) {
        if (error.name === 'AbortError') return;
      }
      if (TERMINAL.has(status)) stop();
    }
    const again = () => {
      clearTimeout(soon);
      soon = setTimeout(refresh, 100);
    };
    const offMessages = live.messages.on((message) => describeEvent(message).submissionId === id && again());
    const offStates = live.states.on(({ reconnected }) => reconnected && again());
    const timer = setInterval(() => live.state !== 'open' && refresh(), FALLBACK_MS);
    function stop() {
      offMessages();
      offStates();
      clearInterval(timer);
      clearTimeout(soon);
    }
    signal.addEventListener('abort', stop);
    if (TERMINAL.has(status)) stop();
    else if (live.lastSeq !== null && live.lastSeq > (d.version ?? 0)) again(); // an event before we listened
  }

  async function load(route) {
    controller?.abort();
    controller = new AbortController();
    const { signal } = controller;
    id = route.params.id;
    setTitle(`submission ${shortId(id)}`);
    fill(root, loading('Loading the submission'));
    let d;
    try {
      d = await fetchAndRender(signal);
    } catch (error) {
      if (error.name === 'AbortError') return;
      fill(root, error.code === 'unknown_submission' ? empty(`No submission ${id}.`) : failure(error, () => load(route)));
      return;
    }
    follow(d, signal);
  }

  return {
    mount(container, route) {
      root = container;
      load(route);
    },
    update(route) {
      if (route.params.id !== id) load(route);
    },
    unmount() {
      controller?.abort();
    },
  };
}
