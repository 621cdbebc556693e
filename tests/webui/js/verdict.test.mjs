// A result document set against what it competed with. rejected.json is the detail of a
// rejected run captured from `kz up` (sandbox backend: the judge measured the incumbent side
// by side), its samples shortened.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { comparisonOf, speedupOver } from '../../../webui/js/lib/verdict.js';

const rejected = JSON.parse(readFileSync(new URL('./fixtures/rejected.json', import.meta.url)));
const stub = JSON.parse(readFileSync(new URL('./fixtures/submission.json', import.meta.url)));

test('a side-by-side run compares every workload with the incumbent, as the judge measured', () => {
  const doc = rejected.result_document;
  const c = comparisonOf(doc);
  assert.equal(c.against, 'incumbent');
  assert.equal(c.outcome, 'not_faster');
  assert.match(c.reason, /^not faster: /);
  assert.equal(c.speedup, doc.comparison.speedup);
  assert.deepEqual(c.interval, doc.comparison.interval);
  assert.deepEqual(c.rows.map((r) => r.name), doc.workloads.map((w) => w.name));
  for (const [row, w] of c.rows.map((r, i) => [r, doc.workloads[i]])) {
    assert.equal(row.value, w.value);
    assert.equal(row.other, w.incumbent.median);
    assert.equal(row.speedup, w.speedup.value);
    assert.ok(row.speedup < 1, 'a slower challenger has a speed-up under 1');
    assert.deepEqual(row.interval, w.speedup.interval);
  }
});

test('without side-by-side figures the run is set against the board best, in its direction', () => {
  const doc = stub.result_document;
  assert.equal(comparisonOf(doc), null, 'nothing to compare with');
  const name = doc.workloads[0].name;
  const best = { value: doc.metric.value / 2, workloads: [{ name, value: doc.workloads[0].value / 2 }] };
  const c = comparisonOf(doc, best);
  assert.equal(c.against, 'best');
  assert.equal(c.rows[0].other, best.workloads[0].value);
  assert.equal(c.rows[0].speedup, 0.5);
  assert.equal(c.speedup, 0.5);
  const higher = comparisonOf({ ...doc, metric: { ...doc.metric, better: 'higher' } }, best);
  assert.equal(higher.rows[0].speedup, 2);
});

test('speed-ups are undefined for missing or non-positive values', () => {
  assert.equal(speedupOver(2, 4), 2);
  assert.equal(speedupOver(2, 4, 'higher'), 0.5);
  for (const [a, b] of [[null, 1], [1, undefined], [0, 1], [1, -1], [NaN, 1]]) assert.equal(speedupOver(a, b), null);
});

/** The rejected run as a judge that also measured the board's reference reports it. */
function withReference(doc) {
  const workloads = doc.workloads.map((w) => ({ ...w, reference: { ...w.incumbent, median: w.value * 2 }, reference_speedup: { value: 2, interval: [1.8, 2.2], blocks: 8, log_ratios: [] } }));
  return { ...doc, workloads, score: { against: 'reference', speedup: 2, interval: [1.9, 2.1], confidence: 0.95, blocks: 24 } };
}

test('the reference measured beside the run: a column per workload and the score', () => {
  const c = comparisonOf(withReference(rejected.result_document));
  assert.equal(c.against, 'incumbent');
  assert.equal(c.withReference, true);
  assert.deepEqual(c.score, { speedup: 2, interval: [1.9, 2.1], blocks: 24 });
  for (const row of c.rows) {
    assert.equal(row.referenceSpeedup, 2);
    assert.deepEqual(row.referenceInterval, [1.8, 2.2]);
    assert.equal(row.reference, row.value * 2);
    assert.ok(row.other !== null, 'the incumbent stays');
  }
});

test('a new kernel measured against the reference alone is compared with it', () => {
  const doc = withReference(rejected.result_document);
  const alone = { ...doc, comparison: undefined, workloads: doc.workloads.map(({ incumbent, speedup, ...w }) => w) };
  const c = comparisonOf(alone, { value: 1, workloads: [{ name: doc.workloads[0].name, value: 1 }] });
  assert.equal(c.against, 'reference');
  assert.equal(c.speedup, null);
  assert.ok(c.rows.every((r) => r.other === null && r.referenceSpeedup === 2));
  assert.equal(comparisonOf(rejected.result_document).withReference, false);
  assert.equal(comparisonOf(rejected.result_document).score, null);
});
