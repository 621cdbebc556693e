// Who made a result, as its submitter said: agent, model, tokens, cost, transcript link.
// Pure: the views turn these parts into DOM; node tests read them directly.

const SAFE_URL = /^https?:\/\/[^\s]+$/i;

/** The parts of a provenance to show, in order; [] for none. A link only for http(s). */
export function provenanceParts(p) {
  if (!p || typeof p !== 'object') return [];
  const parts = [];
  if (p.agent) parts.push({ label: 'agent', text: String(p.agent) });
  if (p.model) parts.push({ label: 'model', text: String(p.model) });
  if (Number.isFinite(p.tokens)) parts.push({ label: 'tokens', text: Number(p.tokens).toLocaleString('en-US') });
  if (Number.isFinite(p.cost_usd)) parts.push({ label: 'cost', text: `$${Number(p.cost_usd).toFixed(p.cost_usd < 1 ? 4 : 2)}` });
  if (typeof p.transcript_url === 'string' && SAFE_URL.test(p.transcript_url)) parts.push({ label: 'transcript', text: 'transcript', href: p.transcript_url });
  return parts;
}

/** One line for a table cell: "agent · model" (or '' when neither was given). */
export function madeBy(p) {
  if (!p) return '';
  return [p.agent, p.model].filter(Boolean).join(' · ');
}

/** Keep the board entries whose current result the model and agent made ('' or null: any). */
export function matchesMaker(entry, filters = {}) {
  if (filters.model && entry.model !== filters.model) return false;
  if (filters.agent && entry.agent !== filters.agent) return false;
  return true;
}
