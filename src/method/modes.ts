// The rollout modes, as one table: everything that differs between modes is a field here, and every
// consumer (the rollout loop, the GRPO update, runs and checkpoints, private rehearsal, the CLIs, the worker
// protocol and the page) reads it instead of testing a mode's name. A new mode is a new row plus the code of
// whatever it does that no field describes yet.
import type { GroupMode, Role } from './advantage';

/**
 * Who writes the observation of a call:
 *   environment       the real environment executes it (no Rehearse generation, no Rehearse row);
 *   policy            the policy's Rehearse role, on the same adapter as Act (EnvACE);
 *   rehearse-adapter  a second adapter on the same base, trained on the Rehearse rows only;
 *   base              the frozen base model, adapter off (its rows carry no loss).
 */
export type Simulator = 'environment' | 'policy' | 'rehearse-adapter' | 'base';

/** A parameter set one GRPO update trains: 'shared' is the one adapter that plays both roles. */
export type UpdateTarget = 'shared' | 'act' | 'rehearse';

export interface ModeSpec {
  simulator: Simulator;
  /** Which rows train which parameter set; a role listed nowhere carries no loss. */
  routes: readonly { target: UpdateTarget; roles: readonly Role[] }[];
  /** The advantage grouping the mode trains with whatever was asked (Act rows only: standard GRPO); null = as asked. */
  groups: GroupMode | null;
  /** A short name (run labels, legends). */
  name: string;
  /** The page's option text. */
  label: string;
  /** One line for the CLI's help and the docs. */
  description: string;
}

const TABLE = {
  rehearse: {
    simulator: 'policy',
    routes: [{ target: 'shared', roles: ['act', 'rehearse'] }],
    groups: null,
    name: 'EnvACE (rehearse)',
    label: 'rehearse (EnvACE, shared weights)',
    description: 'EnvACE: the policy rehearses every observation, one adapter for both roles',
  },
  real: {
    simulator: 'environment',
    routes: [{ target: 'act', roles: ['act'] }],
    groups: 'standard',
    name: 'real-environment GRPO',
    label: 'real environment (upper reference)',
    description: 'GRPO against the real environment: the upper reference',
  },
  'per-role': {
    simulator: 'rehearse-adapter',
    routes: [
      { target: 'act', roles: ['act'] },
      { target: 'rehearse', roles: ['rehearse'] },
    ],
    groups: null,
    name: 'per-role adapters',
    label: 'per-role adapters',
    description: 'one adapter per role on the same frozen base, each trained on its own rows',
  },
  'frozen-simulator': {
    simulator: 'base',
    routes: [{ target: 'act', roles: ['act'] }],
    groups: 'standard',
    name: 'frozen-simulator GRPO',
    label: 'frozen simulator (standard GRPO)',
    description: "standard GRPO: the frozen base model rehearses, only Act's rows train",
  },
} as const satisfies Record<string, ModeSpec>;

export type RolloutMode = keyof typeof TABLE;
/** The table, each row read as a ModeSpec (the literal types above only give the mode names). */
export const MODES: Readonly<Record<RolloutMode, ModeSpec>> = TABLE;
export const ROLLOUT_MODES = Object.keys(TABLE) as RolloutMode[];

export const isRolloutMode = (m: unknown): m is RolloutMode => typeof m === 'string' && Object.hasOwn(MODES, m);

/** Roles whose rows carry loss in a mode. */
export const trainedRoles = (mode: RolloutMode): Role[] => MODES[mode].routes.flatMap((r) => [...r.roles]);

/** Whether the policy writes observations (every mode but the real environment's). */
export const rehearses = (mode: RolloutMode): boolean => MODES[mode].simulator !== 'environment';

/** Whether a run of the mode holds a second, Rehearse adapter (its checkpoints keep adapter-rehearse/). */
export const hasRehearseAdapter = (mode: RolloutMode): boolean => MODES[mode].simulator === 'rehearse-adapter';

/** The advantage grouping a mode actually trains with. */
export const effectiveGroups = (mode: RolloutMode, asked: GroupMode): GroupMode => MODES[mode].groups ?? asked;

/**
 * Real episodes a run spends per step (the budget the paper's premise counts): every rollout in the real
 * environment's mode, the realPrompts groups in a rehearsing one.
 */
export const realEpisodesPerStep = (c: { mode: RolloutMode; promptsPerStep: number; k: number; realPrompts?: number }): number =>
  (rehearses(c.mode) ? (c.realPrompts ?? 0) : c.promptsPerStep) * c.k;
