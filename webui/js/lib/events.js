// Pure reading of log events: subjects, kinds, one-line summaries, submission states.

import { formatNumber } from './format.js';

export const TERMINAL = new Set(['committed', 'rejected', 'failed', 'cancelled']);
const AGGREGATES = new Set(['submission', 'kernel', 'runner']);

/** Decode a subject token (every byte outside [A-Za-z0-9_+-] is %XX). */
export function decodeToken(token) {
  try {
    return decodeURIComponent(token);
  } catch {
    return token;
  }
}

/** `kz.ev.<aggregate>.<arch>.<id>.<type>` into its parts, or null for other subjects. */
export function parseSubject(subject) {
  const parts = String(subject ?? '').split('.');
  if (parts.length !== 6 || parts[0] !== 'kz' || parts[1] !== 'ev') return null;
  const [, , aggregate, arch, id, type] = parts;
  return { aggregate, arch: decodeToken(arch), id: decodeToken(id), type };
}

/**
 * The {aggregate, type} of a feed message. /api/events sends the bare event (its SSE `event:`
 * is the type, `id:` the stream sequence): the aggregate follows from its ids, since kernel and
 * submission events share type names (`claimed`).
 */
export function eventKind(message) {
  const fromSubject = parseSubject(message?.subject);
  if (fromSubject) return { aggregate: fromSubject.aggregate, type: fromSubject.type };
  const e = message?.event ?? message ?? {};
  const raw = String(e.type ?? '');
  const [head, ...rest] = raw.split('.');
  if (rest.length && AGGREGATES.has(head)) return { aggregate: head, type: rest.join('.') };
  if (e.submission_id) return { aggregate: 'submission', type: raw };
  if (e.runner_id && !e.kernel_id) return { aggregate: 'runner', type: raw };
  if (e.kernel_id) return { aggregate: 'kernel', type: raw };
  const aggregate = raw === 'imported' || raw.startsWith('kernel_') ? 'kernel' : raw === 'registered' || raw === 'deregistered' ? 'runner' : 'submission';
  return { aggregate, type: raw };
}

function archOf(e) {
  if (e.kernel_id) return String(e.kernel_id).split('/')[0];
  if (Array.isArray(e.arches)) return e.arches.join(',');
  return e.arch ?? null;
}

const TONES = {
  accepted: 'good',
  committed: 'good',
  rejected: 'bad',
  failed: 'bad',
  cancelled: 'muted',
  disqualified: 'bad',
  deregistered: 'muted',
};

function metricValue(body) {
  const value = body.value ?? body.metric?.value ?? body.result?.metric?.value;
  if (typeof value !== 'number') return '';
  const unit = body.unit ?? body.metric?.unit ?? body.result?.metric?.unit ?? '';
  return ` ${formatNumber(value)}${unit ? ` ${unit}` : ''}`;
}

function summary(type, e) {
  switch (type) {
    case 'submitted':
      return `submitted by ${e.submitter_id ?? e.actor ?? 'someone'}${e.message ? `: ${e.message}` : ''}`;
    case 'claimed':
      return e.runner_id ? `claimed by ${e.runner_id}${e.attempt ? ` (attempt ${e.attempt})` : ''}` : `lease taken by ${e.holder ?? e.actor ?? '?'}`;
    case 'result':
      return `result reported${metricValue(e)}${e.outcome ? ` (${e.outcome})` : ''}`;
    case 'imported':
      return `kernel imported${e.submitter_id ? ` by ${e.submitter_id}` : ''}`;
    case 'kernel_claimed':
      return `optimisation lease taken by ${e.holder ?? e.actor ?? '?'}`;
    case 'kernel_released':
    case 'released':
      return `optimisation lease released${e.holder ? ` by ${e.holder}` : ''}`;
    case 'accepted':
    case 'rejected':
      return `${type}${metricValue(e)}${e.reason ?? e.result?.reason ? ` — ${e.reason ?? e.result.reason}` : ''}`;
    case 'failed':
      return `failed${e.code ?? e.reason_code ? ` (${e.code ?? e.reason_code})` : ''}${e.message ?? e.reason ? `: ${e.message ?? e.reason}` : ''}`;
    case 'committed': {
      const source = e.source_commit ?? e.commits?.source ?? e.source;
      return `committed${source ? ` as ${String(source).slice(0, 10)}` : ''}`;
    }
    case 'registered':
      return `runner registered${e.device ? ` on ${typeof e.device === 'string' ? e.device : e.device.name ?? ''}` : ''}${e.backend ? ` (${e.backend})` : ''}`;
    default:
      return `${type}${e.reason ? ` — ${e.reason}` : ''}`;
  }
}

/** One feed message into what a list row shows. */
export function describeEvent(message) {
  const e = message?.event ?? {};
  const subject = parseSubject(message?.subject);
  const { aggregate, type } = eventKind(message);
  const submissionId = e.submission_id ?? (aggregate === 'submission' ? subject?.id : null) ?? null;
  const kernelId = e.kernel_id ?? (aggregate === 'kernel' ? subject?.id : null) ?? null;
  const runnerId = e.runner_id ?? (aggregate === 'runner' ? subject?.id : null) ?? null;
  return {
    seq: message?.seq ?? null,
    aggregate,
    type,
    arch: subject?.arch ?? archOf(e),
    at: e.occurred_at ?? null,
    actor: e.actor ?? null,
    eventId: e.event_id ?? null,
    submissionId,
    kernelId,
    runnerId,
    tone: TONES[type] ?? 'info',
    text: summary(type, e),
  };
}

/** True when a feed message may change what index.json says. */
export function changesIndex(message) {
  const { aggregate, type } = eventKind(message);
  if (aggregate === 'runner') return true;
  if (aggregate === 'kernel') return type === 'imported';
  return ['submitted', 'claimed', 'accepted', 'committed', 'rejected', 'failed', 'cancelled', 'disqualified'].includes(type);
}

/** The submission status an event type leads to (null when it changes none). */
export function statusAfter(type) {
  return (
    {
      submitted: 'queued',
      claimed: 'running',
      result: 'running',
      accepted: 'accepted',
      committed: 'committed',
      rejected: 'rejected',
      failed: 'failed',
      cancelled: 'cancelled',
    }[type] ?? null
  );
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
      return { submission_id: d.submission_id, submitter_id: d.submitter_id, message: d.message };
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
    default:
      return { submission_id: d.submission_id };
  }
}

/**
 * A submission's events as timeline rows, oldest first: feed messages ({seq, subject, event}),
 * bare events, or the detail's `{seq, type, occurred_at, actor}` rows (pass the flattened
 * detail as `detail` to fill in reasons, values and commits).
 */
export function timeline(events, detail = null) {
  return (events ?? [])
    .map((item) => (item && item.event ? item : { seq: item?.seq ?? null, subject: item?.subject, event: { ...detailContext(detail, item ?? {}), ...item } }))
    .map((m) => describeEvent(m))
    .sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
}

/** /api/submissions/{uuid} nests the status document under `submission`: one flat object. */
export function flattenSubmission(raw) {
  if (!raw || typeof raw !== 'object' || !raw.submission) return raw;
  const { submission, ...rest } = raw;
  return { ...rest, ...submission };
}
