// Feed messages (the bare events /api/events sends) read into rows, statuses and timelines.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { changesIndex, describeEvent, eventKind, flattenSubmission, timeline, TERMINAL, TONES } from '../../../webui/js/lib/events.js';
import { EVENT_AGGREGATE, LIVE_EVENT_TYPES, LOG_EVENT_TYPES, STATUS, STATUSES, TERMINAL_STATUSES } from '../../../webui/js/lib/vocab.js';

const events = JSON.parse(readFileSync(new URL('./fixtures/events.json', import.meta.url)));
const detail = JSON.parse(readFileSync(new URL('./fixtures/submission.json', import.meta.url)));

test('the aggregate of an event is the one its type belongs to, from the vocabulary', () => {
  assert.deepEqual(eventKind({ event: { type: 'claimed', submission_id: 's', kernel_id: 'k' } }), { aggregate: 'submission', type: 'claimed' });
  assert.deepEqual(eventKind({ event: { type: 'kernel_claimed', kernel_id: 'k', holder: 'ada' } }), { aggregate: 'kernel', type: 'kernel_claimed' });
  assert.deepEqual(eventKind({ event: { type: 'registered', runner_id: 'r1', arches: ['cpu'] } }), { aggregate: 'runner', type: 'registered' });
  assert.deepEqual(eventKind({ event: { type: 'board_reviewed', kernel_id: 'k' } }), { aggregate: 'kernel', type: 'board_reviewed' });
  assert.deepEqual(eventKind({ event: { type: 'teleported', submission_id: 's' } }), { aggregate: 'unknown', type: 'teleported' });
});

test('the vocabulary is the generated one: every status and event type the Python defines', () => {
  assert.ok(STATUSES.includes(STATUS.COMMITTED) && STATUSES.includes('new'));
  assert.ok(Object.isFrozen(STATUSES) && Object.isFrozen(EVENT_AGGREGATE));
  assert.deepEqual([...TERMINAL].sort(), [...TERMINAL_STATUSES].sort());
  assert.deepEqual(Object.keys(EVENT_AGGREGATE).sort(), [...LOG_EVENT_TYPES, ...LIVE_EVENT_TYPES].sort());
  for (const type of Object.keys(TONES)) assert.ok(type in EVENT_AGGREGATE, `tone for ${type}, an event type`);
});

test('every event of a real feed describes itself with a link target, an arch and a sentence', () => {
  assert.ok(events.length > 20);
  for (const message of events) {
    const row = describeEvent(message);
    assert.equal(row.seq, message.seq);
    assert.ok(row.submissionId || row.kernelId || row.runnerId, `seq ${message.seq} links somewhere`);
    assert.ok(row.arch, `seq ${message.seq} has an arch`);
    assert.ok(row.text.length > 3);
    assert.equal(row.at, message.event.occurred_at);
  }
  const accepted = describeEvent(events.find((m) => m.event.type === 'accepted'));
  assert.equal(accepted.tone, 'good');
  assert.match(accepted.text, /^accepted [\d.,]+ us — /);
  const committed = describeEvent(events.find((m) => m.event.type === 'committed'));
  assert.match(committed.text, /^committed as [0-9a-f]{10}$/);
  assert.match(describeEvent(events[0]).text, /runner registered on cpu/);
});

test('a failure names its code and reason', () => {
  const row = describeEvent({ seq: 9, event: { type: 'failed', submission_id: 's', kernel_id: 'cpu/a/b/c/d', code: 'build_failed', reason: 'nvcc missing' } });
  assert.equal(row.tone, 'bad');
  assert.equal(row.text, 'failed (build_failed): nvcc missing');
});

test('the terminal statuses are final', () => {
  assert.ok(TERMINAL.has('committed') && TERMINAL.has('failed') && !TERMINAL.has('accepted') && !TERMINAL.has('queued'));
});

test('every event of the log may change index.json; live heartbeats do not', () => {
  const kind = (type, extra = {}) => ({ event: { type, submission_id: 's', kernel_id: 'cpu/a/b/c/d', ...extra } });
  for (const type of LOG_EVENT_TYPES) assert.equal(changesIndex(kind(type)), true, type);
  for (const type of LIVE_EVENT_TYPES) assert.equal(changesIndex(kind(type)), false, type);
  assert.equal(changesIndex(kind('teleported')), false);
});

test('the submission detail flattens and its event rows become a filled-in timeline', () => {
  const d = flattenSubmission(detail);
  assert.equal(d.status, 'committed');
  assert.equal(d.submission_id, detail.submission.submission_id);
  assert.deepEqual(d.events, detail.events);
  const rows = timeline([...d.events].reverse(), d);
  assert.deepEqual(rows.map((r) => r.type), ['submitted', 'claimed', 'result', 'accepted', 'committed']);
  assert.deepEqual(rows.map((r) => r.seq), d.events.map((e) => e.seq));
  assert.ok(rows.every((r) => r.submissionId === d.submission_id));
  assert.match(rows[0].text, new RegExp(`submitted by ${d.submitter_id}: ${d.message}`));
  assert.match(rows[1].text, new RegExp(`claimed by ${d.runner_id}`));
  assert.match(rows[3].text, /stub backend: accepted/);
  assert.equal(rows[4].text, `committed as ${d.commits.source.slice(0, 10)}`);
  assert.deepEqual(timeline(undefined), []);
  assert.equal(flattenSubmission(null), null);
});

test('a confirmation run reads as such in the feed and on its timeline', () => {
  const record = '00000000-0000-4000-8000-000000000002';
  const ids = { submission_id: '00000000-0000-4000-9000-000000000002', kernel_id: 'sm90/Norm/RMSNorm/fp16/fast' };
  const opened = describeEvent({ seq: 1, event: { type: 'submitted', actor: 'projector', ...ids, confirms: record } });
  assert.equal(opened.text, 'confirmation run of 00000000 opened by projector: its package measured a second time');
  const agreed = describeEvent({ seq: 2, event: { type: 'confirmed', ...ids, confirms: record, reason: 'agrees: 2x the reference' } });
  assert.deepEqual([agreed.aggregate, agreed.tone], ['submission', 'good']);
  assert.equal(agreed.text, 'confirmed 00000000 (a second run agreed) — agrees: 2x the reference');
  const disputed = describeEvent({ seq: 3, event: { type: 'disputed', ...ids, confirms: record, reason: 'disagrees: 1.1x' } });
  assert.deepEqual([disputed.tone, disputed.text], ['bad', 'disputed 00000000 (a second run disagreed) — disagrees: 1.1x']);
  const detail = { ...ids, confirms: record, submitter_id: 'ada', status: 'confirmed', result: { reason: 'agrees: 2x' }, result_document: { reason: 'agrees: 2x' } };
  const rows = timeline([{ seq: 5, type: 'confirmed', occurred_at: 't', actor: 'referee' }, { seq: 4, type: 'submitted', occurred_at: 't', actor: 'projector' }], detail);
  assert.deepEqual(rows.map((r) => r.text), ['confirmation run of 00000000 opened by projector: its package measured a second time', 'confirmed 00000000 (a second run agreed) — agrees: 2x']);
});

test('a retry reads as measured again, with the runner it avoids and why', () => {
  const row = describeEvent({ seq: 9, event: { type: 'requeued', submission_id: 's', kernel_id: 'cpu/a/b/c/d', code: 'unsettled', reason: 'the host was too noisy to tell: spread 34%', avoid_runner: 'r1', actor: 'referee' } });
  assert.equal(row.tone, 'warn');
  assert.equal(row.text, 'measured again (another runner preferred over r1): the host was too noisy to tell: spread 34%');
});
