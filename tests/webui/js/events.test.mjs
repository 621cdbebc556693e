// Feed messages are read from their subjects and bodies into rows, statuses and timelines.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { changesIndex, describeEvent, eventKind, parseSubject, statusAfter, timeline, TERMINAL } from '../../../webui/js/lib/events.js';

const events = JSON.parse(readFileSync(new URL('../fixtures/events.json', import.meta.url)));

test('subjects decode their percent-encoded tokens', () => {
  assert.deepEqual(parseSubject('kz.ev.kernel.sm_9%2E0.sm90%2FAttention%2FMHA%2Ffp16%2Fflash_v3.imported'), {
    aggregate: 'kernel', arch: 'sm_9.0', id: 'sm90/Attention/MHA/fp16/flash_v3', type: 'imported',
  });
  assert.equal(parseSubject('kz.live.runner.sm90.r1'), null);
});

test('the kind comes from the subject, or else the event type', () => {
  assert.deepEqual(eventKind({ subject: 'kz.ev.runner.sm90.r1.registered', event: {} }), { aggregate: 'runner', type: 'registered' });
  assert.deepEqual(eventKind({ event: { type: 'submission.accepted' } }), { aggregate: 'submission', type: 'accepted' });
  assert.deepEqual(eventKind({ event: { type: 'imported' } }), { aggregate: 'kernel', type: 'imported' });
});

test('every fixture event describes itself with a link target and a sentence', () => {
  for (const message of events) {
    const row = describeEvent(message);
    assert.equal(row.seq, message.seq);
    assert.ok(row.submissionId, `seq ${message.seq} has a submission`);
    assert.ok(row.text.length > 3);
    assert.equal(row.at, message.event.occurred_at);
  }
  const failed = describeEvent(events.find((m) => m.event.type === 'failed'));
  assert.equal(failed.tone, 'bad');
  assert.match(failed.text, /build_failed/);
});

test('statuses follow the lifecycle and the terminal set is final', () => {
  assert.deepEqual(['submitted', 'claimed', 'accepted', 'committed'].map(statusAfter), ['queued', 'running', 'accepted', 'committed']);
  assert.equal(statusAfter('imported'), null);
  assert.ok(TERMINAL.has('committed') && TERMINAL.has('failed') && !TERMINAL.has('accepted'));
});

test('index-changing events are recognised', () => {
  assert.equal(changesIndex({ subject: 'kz.ev.submission.sm90.x.committed', event: {} }), true);
  assert.equal(changesIndex({ subject: 'kz.ev.submission.sm90.x.result', event: {} }), false);
  assert.equal(changesIndex({ subject: 'kz.ev.runner.sm90.r1.registered', event: {} }), true);
});

test('a timeline orders by sequence and accepts bare events', () => {
  const sub = events.filter((m) => m.event.submission_id === events[0].event.submission_id);
  const rows = timeline([...sub].reverse());
  assert.deepEqual(rows.map((r) => r.seq), sub.map((m) => m.seq));
  assert.equal(timeline([{ type: 'submitted', occurred_at: 'x' }])[0].type, 'submitted');
  assert.deepEqual(timeline(undefined), []);
});
