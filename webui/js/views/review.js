// Marks of the review side (docs/review.md): suspect results and unreviewed boards; and a
// record's confirmation mark (docs/judging.md, "Confirmation runs").

import { h } from '../dom.js';
import { confirmationMark } from '../lib/status.js';

/** Whether a status document's `suspect` still stands (marked and not cleared). */
export function isSuspect(suspect) {
  return Boolean(suspect && !suspect.cleared);
}

function reasonText(r) {
  const where = r.path ? ` (${r.path}${r.line ? `:${r.line}` : ''})` : '';
  return `${r.source === 'runtime' ? 'judge flag' : 'tripwire'} ${r.code}${where}${r.message ? `: ${r.message}` : ''}`;
}

/** The badge of a suspect result: a warning while it stands, a muted note once cleared. */
export function suspectBadge(suspect) {
  if (!suspect) return null;
  const reasons = (suspect.reasons ?? []).map(reasonText).join('\n');
  if (suspect.cleared) return h('span', { class: 'badge tone-muted suspect-cleared', title: `cleared by a maintainer${suspect.cleared_reason ? `: ${suspect.cleared_reason}` : ''}\n${reasons}` }, 'suspect · cleared');
  return h('span', { class: 'badge tone-warn suspect', title: `marked suspect for a maintainer's look:\n${reasons}` }, 'suspect');
}

/** The reasons of a suspect mark, one per line. */
export function suspectReasons(suspect) {
  if (!suspect?.reasons?.length) return null;
  return h('ul', { class: 'suspect-reasons' }, suspect.reasons.map((r) => h('li', {}, reasonText(r))));
}

/** The mark of a board whose judge no maintainer has accepted yet. */
export function unreviewedBadge() {
  return h('span', { class: 'badge tone-warn unreviewed', title: 'a submission opened this board and no maintainer has reviewed its judge yet: it is ranked apart from the reviewed boards' }, 'unreviewed');
}

/**
 * A result's confirmation mark (`unconfirmed`, `confirmed`, `disputed`) as a badge: an icon and
 * a label (the label hides on narrow boards), the meaning as its tooltip; a link when `href` is
 * given (the confirmation run). Null for a result without a mark.
 */
export function confirmationBadge(mark, { href = null, extra = '' } = {}) {
  const look = confirmationMark(mark);
  if (!look) return null;
  const title = extra ? `${look.title}\n${extra}` : look.title;
  return h(
    href ? 'a' : 'span',
    { class: `badge tone-${look.tone} confirm confirm-${look.mark}`, href, title, 'data-confirmation': look.mark },
    h('span', { class: 'icon', 'aria-hidden': 'true' }, look.icon),
    h('span', { class: 'label' }, ` ${look.label}`),
  );
}
