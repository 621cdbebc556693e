// Provenance on the pages: what is shown of who made a result, and the board's maker filter.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { madeBy, matchesMaker, provenanceParts } from '../../../webui/js/lib/provenance.js';
import { facets, filterBoards } from '../../../webui/js/lib/model.js';

test('every given field is shown in order, the transcript as a link', () => {
  const parts = provenanceParts({ agent: 'codex', model: 'gpt-5', tokens: 12000, cost_usd: 0.5, transcript_url: 'https://example.org/t' });
  assert.deepEqual(parts.map((p) => p.label), ['agent', 'model', 'tokens', 'cost', 'transcript']);
  assert.equal(parts[2].text, '12,000');
  assert.equal(parts[3].text, '$0.5000');
  assert.equal(parts[4].href, 'https://example.org/t');
});

test('a link that is not http(s) is never shown, and no provenance shows nothing', () => {
  assert.deepEqual(provenanceParts({ transcript_url: 'javascript:alert(1)' }), []);
  assert.deepEqual(provenanceParts(null), []);
  assert.equal(madeBy(null), '');
  assert.equal(madeBy({ model: 'm' }), 'm');
});

test('the board filter keeps the kernels a model or agent made, and lists the makers', () => {
  const entry = (name, model, agent) => ({ id: `cpu/N/R/fp32/${name}`, name, title: name, language: 'python', model, agent, entries: [] });
  const board = { key: 'cpu/N/R/fp32', arch: 'cpu', op_class: 'N', sub_class: 'R', quant: 'fp32', entries: [entry('a', 'm1', 'x'), entry('b', 'm2', 'x'), entry('c', null, null)], count: 3 };
  assert.deepEqual(facets([board]).model, ['m1', 'm2']);
  assert.deepEqual(facets([board]).agent, ['x']);
  const [only] = filterBoards([board], { model: 'm2' });
  assert.deepEqual(only.entries.map((e) => e.name), ['b']);
  assert.deepEqual(filterBoards([board], { agent: 'x' })[0].entries.map((e) => e.name), ['a', 'b']);
  assert.deepEqual(filterBoards([board], { model: 'none' }), []);
  assert.ok(matchesMaker(board.entries[2], {}));
});
