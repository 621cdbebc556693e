// Statuses and confirmation marks: every status of the generated vocabulary has a tone and a
// note; a record's confirmation mark reads as index.json's schema names it.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { CONFIRMATION_MARKS, STATUS_NOTE, STATUS_TONE, confirmationMark, markOfRun, statusLook } from '../../../webui/js/lib/status.js';
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
  assert.match(statusLook(STATUS.DISPUTED).note, /disagreed.*not ranked first/);
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
  assert.match(disputed.title, /second run .*disagreed.*not ranked first/);
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
