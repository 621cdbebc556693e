// Pure words and tones of submission statuses and of a result's confirmation mark. Statuses are
// the generated vocabulary's (vocab.js); a test checks every one has a tone and a note.

import { STATUS } from './vocab.js';

const { NEW, QUEUED, RUNNING, ACCEPTED, COMMITTED, REJECTED, FAILED, CANCELLED, CONFIRMED, DISPUTED } = STATUS;

/** The badge tone of each status. */
export const STATUS_TONE = Object.freeze({
  [NEW]: 'muted',
  [QUEUED]: 'info',
  [RUNNING]: 'warn',
  [ACCEPTED]: 'good',
  [COMMITTED]: 'good',
  [CONFIRMED]: 'good',
  [REJECTED]: 'bad',
  [FAILED]: 'bad',
  [DISPUTED]: 'bad',
  [CANCELLED]: 'muted',
});

/** What each status means, as a badge's tooltip. */
export const STATUS_NOTE = Object.freeze({
  [NEW]: 'not queued yet',
  [QUEUED]: 'waiting for a runner',
  [RUNNING]: 'a runner is measuring it',
  [ACCEPTED]: 'the judge accepted it; it is being committed to main',
  [COMMITTED]: 'accepted and committed to main',
  [CONFIRMED]: 'a confirmation run: it measured a record again and agreed with it',
  [REJECTED]: 'the referee rejected it: not faster, its own failure or wrong output, or inconclusive (the host could not tell)',
  [FAILED]: 'the run failed through no verdict on the kernel: the build, the judge, its result document or the time limit',
  [DISPUTED]: 'a confirmation run: it measured a record again and disagreed with it; that record takes no rank (the kernel ranks by its earlier result that stands, if any)',
  [CANCELLED]: 'cancelled before it ended',
});

/** {tone, note} of a status; an unknown one is muted and says so. */
export function statusLook(status) {
  return { tone: STATUS_TONE[status] ?? 'muted', note: STATUS_NOTE[status] ?? (status ? `status ${status}` : 'no status') };
}

/** The marks index.json gives a result that took rank 1 on its board and is run again. */
export const CONFIRMATION_MARKS = Object.freeze(['unconfirmed', 'confirmed', 'disputed']);

const MARKS = {
  unconfirmed: { icon: '…', label: 'awaiting a second run', line: 'unconfirmed: awaiting a second run', tone: 'muted', title: 'unconfirmed: it took rank 1 on its board and is being measured a second time (a confirmation run) before the board calls it a record' },
  confirmed: { icon: '✓', label: 'confirmed', line: 'confirmed by a second run', tone: 'good', title: 'confirmed: a second run (a confirmation run) measured it again and agreed with its score' },
  disputed: { icon: '!', label: 'disputed', line: 'disputed: a second run disagreed, so it takes no rank', tone: 'warn', title: "disputed: a second run (a confirmation run) disagreed with its score, so it takes no rank: the kernel's earlier result that stands ranks for it, or the kernel is listed unranked" },
};

/**
 * How a confirmation mark is shown: `{mark, icon, label, line, tone, title}` (`line`: a sentence
 * for a tooltip or a list), or null for a result
 * without one (it never took rank 1) or a mark this page does not know.
 */
export function confirmationMark(mark) {
  const look = MARKS[mark];
  return look ? { mark, ...look } : null;
}

/** The mark a confirmation run's status gives the result it confirms (a failed run leaves it unconfirmed). */
export function markOfRun(status) {
  if (status === CONFIRMED) return 'confirmed';
  if (status === DISPUTED) return 'disputed';
  return 'unconfirmed';
}

/**
 * The words after a submission's status badge, as the API and `kz status` say them: a failure's
 * code then its message (the code names the step that failed), any other ending's message
 * alone (a rejection's code would repeat the status: "rejected rejected:"). Empty without one.
 */
export function endingWords(status, error) {
  if (!error?.message) return '';
  return status === STATUS.FAILED && error.code ? `${error.code}: ${error.message}` : error.message;
}

const READINGS = {
  measured: { label: 'measured', tone: 'good', title: 'every figure is well above what the runner can resolve and the score interval is settled' },
  unsettled: { label: 'unsettled', tone: 'warn', title: 'the score interval spread wider than a settled one may: the host was too noisy to tell' },
  too_small: { label: 'too small', tone: 'warn', title: 'a figure is within ten times what the runner can resolve: the workload is too small to measure here' },
};

/** How the validity gate's reading of a result is shown: {label, tone, title, line}, or null. */
export function validityLook(validity) {
  const look = READINGS[validity?.reading];
  if (!look) return null;
  const spread = Number.isFinite(validity.spread) ? ` (spread ${(100 * validity.spread).toFixed(1)} %)` : '';
  return { ...look, line: `${look.label}${spread}${validity.reason ? `: ${validity.reason}` : ''}` };
}

/** A retry in progress, in words; null when none is. */
export function retryLine(retry) {
  if (!retry?.in_progress) return null;
  return `measured again (retry ${retry.count} of 2 at most): ${retry.reason ?? 'no reason given'}`;
}

/** A rival the judge voided beside this result: whose fault it was, in words. */
export function rivalLine(rival) {
  return `the ${rival.role} was voided (${rival.reason ?? rival.code ?? 'no reason given'}): its fault, not this submission's`;
}

/** Why a board row is unranked, or what its current result's hold-back is, in one sentence. */
export function standingNote(row) {
  if (row?.unranked) return `not ranked: ${row.unranked}`;
  if (row?.heldBack) return `its newest result is held back (${row.heldBack.reason}); the earlier one that stands ranks it`;
  return null;
}
