import { describe, expect, it } from 'vitest';
import { cpuProfileArgs } from '../../src/platform.js';

describe('cpuProfileArgs', () => {
  it('profiles no child without MAILFLEET_NODE_CPU_PROF_DIR, even when some are named', () => {
    expect(cpuProfileArgs('webhooks', {})).toEqual([]);
    expect(cpuProfileArgs('webhooks', { MAILFLEET_NODE_CPU_PROF_ONLY: 'webhooks' })).toEqual([]);
  });

  it('profiles every child into the directory when none is named', () => {
    const env = { MAILFLEET_NODE_CPU_PROF_DIR: '/tmp/prof' };
    for (const name of ['auth', 'webhooks', 'gateway']) expect(cpuProfileArgs(name, env)).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/prof']);
  });

  it('profiles only the named children when MAILFLEET_NODE_CPU_PROF_ONLY lists some', () => {
    const env = { MAILFLEET_NODE_CPU_PROF_DIR: '/tmp/prof', MAILFLEET_NODE_CPU_PROF_ONLY: 'webhooks, gateway' };
    expect(cpuProfileArgs('webhooks', env)).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/prof']);
    expect(cpuProfileArgs('gateway', env)).toEqual(['--cpu-prof', '--cpu-prof-dir=/tmp/prof']);
    expect(cpuProfileArgs('analytics', env)).toEqual([]);
    expect(cpuProfileArgs('web', env)).toEqual([]);
  });
});
