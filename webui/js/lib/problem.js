// What a board imported from a problem set says of itself (desc.yaml's x-problem): the set, the
// problem, where and at which commit it came from, and the licence with any conditions on use.

const SETS = { kernelbench: 'KernelBench', gpumode: 'GPU MODE', flashinfer: 'FlashInfer Trace' };

/** {set, facts: [[label, value]], licence, conditions} of an imported problem, else null. */
export function problemFacts(desc) {
  const problem = desc?.['x-problem'];
  if (!problem || typeof problem !== 'object') return null;
  const licence = problem.licence && typeof problem.licence === 'object' ? problem.licence : null;
  const set = SETS[problem.format] ?? String(problem.format ?? 'a problem set');
  const facts = [
    ['set', set],
    ['problem', problem.id],
    ['board version', problem.board_version],
    ['source', problem.source],
    ['commit', problem.commit ? String(problem.commit).slice(0, 12) : ''],
    ['licence', licence?.spdx ?? desc.license ?? ''],
  ].filter(([, value]) => value !== undefined && value !== null && value !== '');
  return { set, facts, licence: licence?.title ?? desc.license ?? '', conditions: licence?.conditions ?? '' };
}
