// Statuses and confirmation marks: every status of the generated vocabulary has a tone and a
// note; a record's confirmation mark reads as index.json's schema names it.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CONFIRMATION_MARKS, STATUS_NOTE, STATUS_TONE, confirmationMark, endingWords, markOfRun, retryLine, rivalLine, standingNote, statusLook, validityLook } from '../../../webui/js/lib/status.js';
import { STATUS, STATUSES } from '../../../webui/js/lib/vocab.js';

const schema = JSON.parse(readFileSync(new URL('../../../schemas/index.schema.json', import.meta.url)));

/** Every `confirmation` enum the index schema declares. */
function schemaMarks(node, found = []) {
  if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === 'confirmation' && Array.isArray(value?.enum)) found.push(value.enum);
      else schemaMarks(value, found);
    }
  }
  return found;
}

test('every status of the vocabulary has a tone and a note; no other status has one', () => {
  assert.deepEqual(Object.keys(STATUS_TONE).sort(), [...STATUSES].sort());
  assert.deepEqual(Object.keys(STATUS_NOTE).sort(), [...STATUSES].sort());
  for (const status of STATUSES) assert.ok(statusLook(status).note.length > 5, status);
});

test('a confirmation run that agreed is good, one that disagreed is bad, and says what it disputes', () => {
  assert.deepEqual(statusLook(STATUS.CONFIRMED).tone, 'good');
  assert.deepEqual(statusLook(STATUS.DISPUTED).tone, 'bad');
  assert.match(statusLook(STATUS.CONFIRMED).note, /confirmation run.*agreed/);
  assert.match(statusLook(STATUS.DISPUTED).note, /disagreed.*takes no rank/);
  assert.deepEqual(statusLook('teleported'), { tone: 'muted', note: 'status teleported' });
});

test('the confirmation marks are those of index.json, each with an icon, a label and a meaning', () => {
  const declared = schemaMarks(schema);
  assert.ok(declared.length >= 2, 'value entries and leaderboard entries declare it');
  for (const marks of declared) assert.deepEqual(marks, [...CONFIRMATION_MARKS]);
  const [unconfirmed, confirmed, disputed] = CONFIRMATION_MARKS.map(confirmationMark);
  assert.deepEqual([unconfirmed.label, unconfirmed.tone], ['awaiting a second run', 'muted']);
  assert.deepEqual([confirmed.icon, confirmed.label, confirmed.tone], ['✓', 'confirmed', 'good']);
  assert.deepEqual([disputed.label, disputed.tone], ['disputed', 'warn']);
  assert.match(disputed.title, /second run .*disagreed.*takes no rank/);
  assert.match(unconfirmed.title, /took rank 1 .*measured a second time/);
  for (const m of [unconfirmed, confirmed, disputed]) assert.ok(m.icon && m.line && m.title);
  assert.equal(confirmationMark(null), null);
  assert.equal(confirmationMark('maybe'), null);
});

test('a confirmation run gives its result the mark of how it ended; a failed run leaves it unconfirmed', () => {
  assert.equal(markOfRun(STATUS.QUEUED), 'unconfirmed');
  assert.equal(markOfRun(STATUS.RUNNING), 'unconfirmed');
  assert.equal(markOfRun(STATUS.FAILED), 'unconfirmed');
  assert.equal(markOfRun(STATUS.CONFIRMED), 'confirmed');
  assert.equal(markOfRun(STATUS.DISPUTED), 'disputed');
});

test('the words after a status are the API\'s: a failure names its code, a rejection says its message once', () => {
  const crash = { code: 'candidate_error', message: 'the candidate failed in a call: ZeroDivisionError: division by zero' };
  assert.equal(endingWords(STATUS.REJECTED, crash), crash.message);
  assert.equal(endingWords(STATUS.REJECTED, { code: 'rejected', message: 'not faster: 1.01x' }), 'not faster: 1.01x'); // never "rejected rejected:"
  assert.equal(endingWords(STATUS.FAILED, { code: 'build_failed', message: 'exit 1' }), 'build_failed: exit 1');
  assert.equal(endingWords(STATUS.COMMITTED, null), '');
});

test('the validity gate\'s reading reads measured, unsettled or too small, with the spread and why', () => {
  assert.deepEqual(validityLook({ reading: 'measured', measured: true, settled: true, spread: 0.008, reason: '' }).line, 'measured (spread 0.8 %)');
  const noisy = validityLook({ reading: 'unsettled', measured: true, settled: false, spread: 0.34, reason: 'the host was too noisy to tell: spread 34%' });
  assert.equal(noisy.tone, 'warn');
  assert.equal(noisy.line, 'unsettled (spread 34.0 %): the host was too noisy to tell: spread 34%');
  assert.equal(validityLook({ reading: 'too_small', measured: false, settled: false, spread: null, reason: 'w: too small to measure here' }).label, 'too small');
  assert.equal(validityLook(null), null);
});

test('a retry in progress, a voided rival and an unranked or held-back kernel each say why', () => {
  assert.equal(retryLine({ count: 1, codes: ['unsettled'], reason: 'spread 40%', in_progress: true }), 'measured again (retry 1 of 2 at most): spread 40%');
  assert.equal(retryLine({ count: 1, codes: ['unsettled'], in_progress: false }), null);
  assert.equal(rivalLine({ role: 'incumbent', status: 'voided', reason: 'it raised KeyError' }), "the incumbent was voided (it raised KeyError): its fault, not this submission's");
  assert.equal(standingNote({ unranked: 'disputed: a second run did not agree with it' }), 'not ranked: disputed: a second run did not agree with it');
  assert.match(standingNote({ heldBack: { submission: 's', reason: 'suspect: held back until a maintainer clears it' } }), /newest result is held back \(suspect/);
  assert.equal(standingNote({}), null);
});
