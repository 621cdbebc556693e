// Pure reading of log events: kinds, one-line summaries, timelines. Event types, their
// aggregates and the statuses come from the generated vocabulary (vocab.js).

import { formatNumber } from './format.js';
import { EVENT_AGGREGATE, LOG_EVENT_TYPES, TERMINAL_STATUSES } from './vocab.js';

/** The statuses a submission never leaves. */
export const TERMINAL = new Set(TERMINAL_STATUSES);

/**
 * The {aggregate, type} of a feed message. /api/events sends the bare event (its SSE `event:`
 * is the type, `id:` the stream sequence); every type belongs to one aggregate.
 */
export function eventKind(message) {
  const type = String((message?.event ?? message ?? {}).type ?? '');
  return { aggregate: EVENT_AGGREGATE[type] ?? 'unknown', type };
}

function archOf(e) {
  if (e.kernel_id) return String(e.kernel_id).split('/')[0];
  return Array.isArray(e.arches) ? e.arches.join(',') : null;
}

/** Row tones by event type (types as vocab.js names them; a test checks every key is one). */
export const TONES = {
  accepted: 'good',
  committed: 'good',
  confirmed: 'good',
  rejected: 'bad',
  failed: 'bad',
  disputed: 'bad',
  disqualified: 'bad',
  suspect: 'warn',
  requeued: 'warn',
  cancelled: 'muted',
  deregistered: 'muted',
};

/** " 131.7 us": the headline of the result document an event carries, or nothing. */
function metricValue(e) {
  const metric = e.result?.metric;
  if (typeof metric?.value !== 'number') return '';
  return ` ${formatNumber(metric.value)}${metric.unit ? ` ${metric.unit}` : ''}`;
}

function short(id) {
  return String(id).slice(0, 8);
}

function summary(type, e) {
  switch (type) {
    case 'submitted':
      if (e.confirms) return `confirmation run of ${short(e.confirms)} opened by ${e.actor ?? 'the referee'}: its package measured a second time`;
      return `submitted by ${e.submitter_id ?? e.actor ?? 'someone'}${e.message ? `: ${e.message}` : ''}`;
    case 'claimed':
      return `claimed by ${e.runner_id ?? e.actor ?? '?'}${e.attempt ? ` (attempt ${e.attempt})` : ''}`;
    case 'result':
      return `result reported${metricValue(e)}${e.outcome ? ` (${e.outcome})` : ''}`;
    case 'imported':
      return `kernel imported${e.submitter_id ? ` by ${e.submitter_id}` : ''}`;
    case 'kernel_claimed':
      return `optimisation lease taken by ${e.holder ?? e.actor ?? '?'}`;
    case 'kernel_released':
      return `optimisation lease released${e.holder ? ` by ${e.holder}` : ''}`;
    case 'accepted':
    case 'rejected': {
      const reason = e.reason ?? e.result?.reason; // the platform's verdict, else the judge's sentence
      return `${type}${metricValue(e)}${reason ? ` — ${reason}` : ''}`;
    }
    case 'confirmed':
    case 'disputed': {
      const reason = e.reason ?? e.result?.reason;
      return `${type} ${e.confirms ? `${short(e.confirms)} ` : ''}(a second run ${type === 'confirmed' ? 'agreed' : 'disagreed'})${reason ? ` — ${reason}` : ''}`;
    }
    case 'failed':
      return `failed${e.code ? ` (${e.code})` : ''}${e.reason ? `: ${e.reason}` : ''}`;
    case 'requeued':
      return `measured again${e.avoid_runner ? ` (another runner preferred over ${e.avoid_runner})` : ''}${e.reason ? `: ${e.reason}` : ''}`;
    case 'committed':
      return `committed${e.source_commit ? ` as ${String(e.source_commit).slice(0, 10)}` : ''}`;
    case 'registered':
      return `runner registered${e.device ? ` on ${e.device}` : ''}${e.backend ? ` (${e.backend})` : ''}`;
    default:
      return `${type}${e.reason ? ` — ${e.reason}` : ''}`;
  }
}

/** One feed message into what a list row shows. */
export function describeEvent(message) {
  const e = message?.event ?? {};
  const { aggregate, type } = eventKind(message);
  return {
    seq: message?.seq ?? null,
    aggregate,
    type,
    arch: archOf(e),
    at: e.occurred_at ?? null,
    actor: e.actor ?? null,
    eventId: e.event_id ?? null,
    submissionId: e.submission_id ?? null,
    kernelId: e.kernel_id ?? null,
    runnerId: e.runner_id ?? null,
    tone: TONES[type] ?? 'info',
    text: summary(type, e),
  };
}

/** True when a feed message is an event of the log: index.json folds every one (live heartbeats are not in it). */
export function changesIndex(message) {
  return LOG_EVENT_TYPES.includes(eventKind(message).type);
}

/**
 * What the submission detail knows about each event type; /api/submissions/{uuid} lists its
 * events as `{seq, type, occurred_at, actor}` rows, so the timeline fills in the rest from it.
 */
function detailContext(d, row) {
  if (!d) return {};
  const doc = d.result_document ?? null;
  switch (row.type) {
    case 'submitted':
      return { submission_id: d.submission_id, submitter_id: d.submitter_id, message: d.message, confirms: d.confirms ?? null };
    case 'claimed':
      return { submission_id: d.submission_id, runner_id: row.actor };
    case 'result':
      return { submission_id: d.submission_id, result: doc, outcome: d.result?.outcome };
    case 'accepted':
    case 'rejected':
      return { submission_id: d.submission_id, result: doc, reason: doc?.reason ?? d.result?.reason };
    case 'committed':
      return { submission_id: d.submission_id, source_commit: d.commits?.source };
    case 'failed':
    case 'cancelled':
      return { submission_id: d.submission_id, code: d.error?.code, reason: d.error?.message };
    case 'disqualified':
      return { submission_id: d.submission_id, reason: d.disqualified };
    case 'requeued':
      return { submission_id: d.submission_id, reason: d.retry?.reason ?? null };
    case 'confirmed':
    case 'disputed':
      return { submission_id: d.submission_id, confirms: d.confirms ?? null, reason: doc?.reason ?? d.result?.reason };
    default:
      return { submission_id: d.submission_id };
  }
}

/**
 * A submission's events as timeline rows, oldest first: feed messages ({seq, event}),
 * bare events, or the detail's `{seq, type, occurred_at, actor}` rows (pass the flattened
 * detail as `detail` to fill in reasons, values and commits).
 */
export function timeline(events, detail = null) {
  return (events ?? [])
    .map((item) => (item && item.event ? item : { seq: item?.seq ?? null, event: { ...detailContext(detail, item ?? {}), ...item } }))
    .map((m) => describeEvent(m))
    .sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
}

/** /api/submissions/{uuid} nests the status document under `submission`: one flat object. */
export function flattenSubmission(raw) {
  if (!raw || typeof raw !== 'object' || !raw.submission) return raw;
  const { submission, ...rest } = raw;
  return { ...rest, ...submission };
}
