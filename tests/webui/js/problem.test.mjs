// An imported board's provenance and licence, as the kernel and board pages show them.
import test from 'node:test';
import assert from 'node:assert/strict';
import { problemFacts } from '../../../webui/js/lib/problem.js';

test('problemFacts lists the set, the problem, its source and the licence with its conditions', () => {
  const desc = {
    license: 'LicenseRef-Example',
    'x-problem': {
      format: 'gpumode', id: 'kz_demo/matmul_py', board_version: 2, source: 'https://example.org/set',
      commit: '85b4b54af546f75d270d77cc59737f335ff08f78',
      licence: { spdx: 'LicenseRef-Example', title: 'Example License', conditions: 'publish your solutions' },
    },
  };
  const facts = problemFacts(desc);
  assert.equal(facts.set, 'GPU MODE');
  assert.deepEqual(facts.facts, [
    ['set', 'GPU MODE'], ['problem', 'kz_demo/matmul_py'], ['board version', 2],
    ['source', 'https://example.org/set'], ['commit', '85b4b54af546'], ['licence', 'LicenseRef-Example'],
  ]);
  assert.equal(facts.conditions, 'publish your solutions');
});

test('problemFacts is null for a kernel of no problem set and keeps a permissive licence quiet', () => {
  assert.equal(problemFacts({ title: 'numpy' }), null);
  assert.equal(problemFacts(null), null);
  const facts = problemFacts({ license: 'MIT', 'x-problem': { format: 'kernelbench', id: 'level1/1_Row_Softmax' } });
  assert.equal(facts.conditions, '');
  assert.deepEqual(facts.facts.at(-1), ['licence', 'MIT']);
});
