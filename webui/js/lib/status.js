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
  [REJECTED]: 'the judge rejected it',
  [FAILED]: 'the run failed (build, benchmark, result or time limit)',
  [DISPUTED]: 'a confirmation run: it measured a record again and disagreed with it; that record is not ranked first',
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
  disputed: { icon: '!', label: 'disputed', line: 'disputed: a second run disagreed, not ranked first', tone: 'warn', title: 'disputed: a second run (a confirmation run) disagreed with its score, so the kernel is not ranked first (it is listed last on its board)' },
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
