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

/** The {aggregate, type} of a feed message, from its subject or else its event's type. */
export function eventKind(message) {
  const fromSubject = parseSubject(message?.subject);
  if (fromSubject) return { aggregate: fromSubject.aggregate, type: fromSubject.type };
  const raw = String(message?.event?.type ?? message?.type ?? '');
  const [head, ...rest] = raw.split('.');
  if (rest.length && AGGREGATES.has(head)) return { aggregate: head, type: rest.join('.') };
  const aggregate = raw === 'imported' || raw === 'released' ? 'kernel' : raw === 'registered' || raw === 'deregistered' ? 'runner' : 'submission';
  return { aggregate, type: raw };
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
      return e.runner_id ? `claimed by ${e.runner_id}${e.attempt ? ` (attempt ${e.attempt})` : ''}` : `claimed by ${e.holder ?? e.actor ?? '?'}`;
    case 'result':
      return `result reported${metricValue(e)}`;
    case 'accepted':
    case 'rejected':
      return `${type}${metricValue(e)}${e.reason ? ` — ${e.reason}` : ''}`;
    case 'failed':
      return `failed${e.code ?? e.reason_code ? ` (${e.code ?? e.reason_code})` : ''}${e.message ?? e.reason ? `: ${e.message ?? e.reason}` : ''}`;
    case 'committed': {
      const source = e.commits?.source ?? e.source_commit ?? e.source;
      return `committed${source ? ` as ${String(source).slice(0, 10)}` : ''}`;
    }
    case 'registered':
      return `runner registered${e.device ? ` on ${typeof e.device === 'string' ? e.device : e.device.name ?? ''}` : ''}`;
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
    arch: subject?.arch ?? e.arch ?? null,
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
  if (aggregate === 'runner' || aggregate === 'kernel') return true;
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

/** A submission's events ({seq, subject, event} or bare events) as timeline rows, oldest first. */
export function timeline(events) {
  return (events ?? [])
    .map((item, i) => (item && item.event ? item : { seq: item?.seq ?? null, subject: item?.subject, event: item, i }))
    .map((m) => describeEvent(m))
    .sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
}
