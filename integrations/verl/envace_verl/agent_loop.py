"""verl agent loop that holds one EnvACE Lab episode per trajectory (registered as "envace_agent").

Why not verl's ToolAgentLoop: its `_call_tool` creates, executes and releases a tool instance for every call,
so a stateful environment starts from a fresh database at each call. This loop opens one server episode when
the trajectory starts, sends every raw generation of the policy to it, and releases it at the end:

  Act       the policy generates from the lab's Act prompt (the server renders it); the raw text goes to
            POST /episodes/ID/act, where the lab's Episode parses it, executes the calls (real mode) or queues
            them (simulate mode), and ends the episode on a reply, an empty turn or the turn limit.
  Rehearse  (simulate mode) for each queued call the *same policy* (verl's server manager, current weights)
            generates from the lab's Rehearse prompt; POST /episodes/ID/rehearse applies it with the lab's
            strict reader (an unreadable rehearsal ends the episode, reward 0).
  Reward    POST /episodes/ID/score {"trajectory": true}: the lab's defaultReward of that episode (real: τ²'s
            DB × COMMUNICATE; simulate: the checklist judge), returned as reward_score.

Tokens: prompt_ids is the Act prompt; response_ids are the Act generations (response_mask 1) and, between them,
the server's `continuation` (the turn's end, the tool responses, the next generation prompt: response_mask 0).
extra_fields["token_roles"] marks each response token: 1 act (generated), 0 real observation / template,
2 rehearsed observation (text the policy imagined, under another prompt: never trained in this sequence).
The Rehearse generations are separate samples (their prompt is the Rehearse prompt), carried in
extra_fields["rehearse_samples"] as {prompt_ids, response_ids, response_logprobs, turn} for a trainer with a
role-wise advantage (EnvACE); verl's stock trainer trains the Act tokens only.

Configuration (environment variables, as verl instantiates agent loops with fixed arguments): ENVACE_URL,
ENVACE_TOKEN or ENVACE_TOKEN_FILE, ENVACE_MODE (real | simulate). The task comes from the row:
extra_info.task_id, or tools_kwargs.<tool>.create_kwargs.task_id (what `npm run export` writes).

Written against verl commit b178a3cd56f58b2d502255daba591e92833930a7 (2026-01-29): AgentLoopBase, register,
AgentLoopOutput, AgentLoopMetrics and the server manager's generate(request_id, prompt_ids=, sampling_params=)
returning TokenOutput(token_ids, log_probs). Without verl, stand-ins with the same interface are used.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Optional
from uuid import uuid4

from .client import EnvaceClient

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register  # type: ignore

    HAVE_VERL = True
except ImportError:
    HAVE_VERL = False
    _registry: dict[str, dict] = {}

    class AgentLoopMetrics(dict):  # type: ignore[no-redef]
        def __init__(self, **kw: Any):
            super().__init__(generate_sequences=0.0, tool_calls=0.0, num_preempted=-1, **kw)

    class AgentLoopOutput:  # type: ignore[no-redef]
        """Stand-in with the fields of verl's AgentLoopOutput."""

        def __init__(self, **kw: Any):
            self.prompt_ids: list[int] = kw["prompt_ids"]
            self.response_ids: list[int] = kw["response_ids"]
            self.response_mask: list[int] = kw["response_mask"]
            self.response_logprobs: Optional[list[float]] = kw.get("response_logprobs")
            self.reward_score: Optional[float] = kw.get("reward_score")
            self.num_turns: int = kw.get("num_turns", 0)
            self.metrics = kw["metrics"]
            self.extra_fields: dict = kw.get("extra_fields", {})

    class AgentLoopBase:  # type: ignore[no-redef]
        def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any = None, **kwargs: Any):
            self.config = getattr(trainer_config, "config", trainer_config)
            self.server_manager = server_manager
            self.tokenizer = tokenizer
            self.processor = processor

    def register(agent_name: str):  # type: ignore[no-redef]
        def decorator(cls):
            _registry[agent_name] = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}
            return cls

        return decorator


ROLE_OBSERVATION, ROLE_ACT, ROLE_REHEARSED = 0, 1, 2


def task_id_of(kwargs: dict) -> str:
    """The row's task: extra_info.task_id, else any tool's create_kwargs.task_id."""
    extra = kwargs.get("extra_info") or {}
    if isinstance(extra, dict) and extra.get("task_id"):
        return str(extra["task_id"])
    tools_kwargs = kwargs.get("tools_kwargs") or (extra.get("tools_kwargs") if isinstance(extra, dict) else None) or {}
    for kw in tools_kwargs.values():
        tid = (kw or {}).get("create_kwargs", {}).get("task_id")
        if tid:
            return str(tid)
    raise ValueError("envace_agent: the row names no task (extra_info.task_id or tools_kwargs.<tool>.create_kwargs.task_id)")


def _cfg(config: Any, path: str, default: Any) -> Any:
    node = config
    for part in path.split("."):
        try:
            node = node[part] if isinstance(node, dict) else getattr(node, part)
        except (KeyError, AttributeError, TypeError):
            return default
        if node is None:
            return default
    return node


@register("envace_agent")
class EnvaceAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any = None, **kwargs: Any):
        super().__init__(trainer_config, server_manager, tokenizer, processor, **kwargs)
        self.mode = os.environ.get("ENVACE_MODE", "real")
        if self.mode not in ("real", "simulate"):
            raise ValueError(f"envace_agent: ENVACE_MODE must be real or simulate, got {self.mode!r}")
        self.client = EnvaceClient(os.environ.get("ENVACE_URL", "http://127.0.0.1:8765"), float(os.environ.get("ENVACE_TIMEOUT", "60")))
        self.response_length = int(_cfg(self.config, "actor_rollout_ref.rollout.response_length", 4096))
        self.eos_ids = set(_ids(getattr(tokenizer, "eos_token_id", None)))
        self.eos_text = getattr(tokenizer, "eos_token", None) or ""

    async def _http(self, fn, *args):
        # The client is synchronous (standard library): keep verl's event loop free while it waits.
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task_id = task_id_of(kwargs)
        created = await self._http(self.client.create_episode, task_id)
        eid = created["episode_id"]
        try:
            return await self._run(eid, task_id, created["prompt"], sampling_params)
        finally:
            await self._http(self.client.release, eid)

    async def _run(self, eid: str, task_id: str, prompt: str, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        prompt_ids = self._encode(prompt)
        response_ids: list[int] = []
        mask: list[int] = []
        roles: list[int] = []
        logprobs: list[float] = []
        have_logprobs = True
        rehearse_samples: list[dict] = []
        request_id = uuid4().hex  # one sticky id: the Act turns reuse the server's prefix cache
        act_turns = 0
        end = None
        while True:
            budget = self.response_length - len(response_ids)
            if budget <= 0:
                end = "response-length"
                break
            out = await self.server_manager.generate(request_id, prompt_ids=prompt_ids + response_ids, sampling_params=sampling_params)
            ids = list(out.token_ids)[:budget]
            act_turns += 1
            response_ids += ids
            mask += [1] * len(ids)
            roles += [ROLE_ACT] * len(ids)
            if out.log_probs and have_logprobs:
                logprobs += list(out.log_probs)[: len(ids)]
            else:
                have_logprobs = False
            text = self.tokenizer.decode([i for i in ids if i not in self.eos_ids], skip_special_tokens=False)
            r = await self._http(self.client.act, eid, text, self.mode)
            while r.get("rehearse"):
                rp = self._encode(r["rehearse"]["prompt"])
                ro = await self.server_manager.generate(uuid4().hex, prompt_ids=rp, sampling_params=sampling_params)
                rids = list(ro.token_ids)
                rehearse_samples.append({"prompt_ids": rp, "response_ids": rids, "response_logprobs": list(ro.log_probs) if ro.log_probs else None, "turn": act_turns - 1, "call": r["rehearse"]["name"]})
                rtext = self.tokenizer.decode([i for i in rids if i not in self.eos_ids], skip_special_tokens=False)
                r = await self._http(self.client.rehearse, eid, rtext)
            if r["done"]:
                end = r["end"]
                break
            cont = r["continuation"]
            if cont is None:
                raise RuntimeError("envace_agent: the server could not place this turn in the lab's Act prompt")
            if ids and ids[-1] in self.eos_ids and self.eos_text and cont.startswith(self.eos_text):
                cont = cont[len(self.eos_text):]  # the policy already generated the turn's end token
            cids = self._encode(cont)
            response_ids += cids
            mask += [0] * len(cids)
            roles += [ROLE_REHEARSED if self.mode == "simulate" else ROLE_OBSERVATION] * len(cids)
            logprobs += [0.0] * len(cids)
        score = await self._http(self.client.score_trajectory, eid)
        n = self.response_length
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[:n],
            response_mask=mask[:n],
            response_logprobs=logprobs[:n] if have_logprobs and logprobs else None,
            reward_score=float(score["reward"]),
            num_turns=2 * act_turns,
            metrics=AgentLoopMetrics(),
            extra_fields={
                "token_roles": roles[:n], "rehearse_samples": rehearse_samples, "episode_id": eid, "task_id": task_id,
                "episode_end": end or score.get("end"), "envace_mode": self.mode,
            },
        )


def _ids(x: Any) -> list[int]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple, set)) else [int(x)]
