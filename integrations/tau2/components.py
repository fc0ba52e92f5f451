"""τ²-bench's own reward components of each conversation of a results file, without its termination gate.

    TAU2_DATA_DIR=... python integrations/tau2/components.py RESULTS.json OUT.json

τ² scores a conversation that did not end with a stop (max steps, an agent or user error) 0 without looking
at it, so its results file says nothing about the database or the facts there. This runs τ²'s own evaluators
(EnvironmentEvaluator: replay of the conversation's calls against a replay of the reference actions;
CommunicateEvaluator: facts in the agent's messages) on every conversation as if it had stopped, so the
lab's verifier can be compared with τ²'s component by component (test/env/tau2-harness.test.ts).
scripts/tau2-harness.sh runs it after τ²'s CLI, in the same venv.
"""

import json
import sys
from pathlib import Path

from tau2.data_model.simulation import Results
from tau2.evaluator.evaluator_communicate import CommunicateEvaluator
from tau2.evaluator.evaluator_env import EnvironmentEvaluator
from tau2.registry import registry


def main(src: str, out: str) -> None:
    results = Results.load(Path(src))
    tasks = {t.id: t for t in results.tasks}
    env = registry.get_env_constructor("retail")
    rows = []
    for sim in results.simulations:
        task = tasks[sim.task_id]
        e = EnvironmentEvaluator.calculate_reward(environment_constructor=env, task=task, full_trajectory=sim.messages)
        c = CommunicateEvaluator.calculate_reward(task=task, full_trajectory=sim.messages)
        db = e.db_check.db_reward if e.db_check is not None else None
        rows.append({
            "simulation_id": sim.id,
            "task_id": sim.task_id,
            "termination_reason": sim.termination_reason.value,
            "reward": sim.reward_info.reward if sim.reward_info is not None else None,
            "db": db,
            "communicate": c.reward,
            "missing_facts": [x.info for x in (c.communicate_checks or []) if not x.met],
        })
    Path(out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
