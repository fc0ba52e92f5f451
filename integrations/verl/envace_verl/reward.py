"""A verl reward function (custom_reward_function) backed by the EnvACE Lab server's scoring.

    custom_reward_function.path=integrations/verl/envace_verl/reward.py
    custom_reward_function.name=compute_score

It rebuilds the trajectory's chat messages from verl's decoded response (`solution_str`: the assistant turns
with their <tool_call> blocks and the <tool_response> blocks verl inserted), opens a fresh episode of the row's
task and asks the server for the lab's reward:
  ENVACE_REWARD=real   (default) the calls replayed on a fresh database, τ²'s DB × COMMUNICATE rule;
  ENVACE_REWARD=judge  the checklist judge of the trajectory as imagined (rehearsed observations).
The server address is ENVACE_URL (default http://127.0.0.1:8765). The task id comes from
extra_info["task_id"] (what `npm run export` writes), else from ground_truth.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

try:  # imported as a package (tests, `import envace_verl.reward`) or by path (verl's custom_reward_function)
    from .client import EnvaceClient
except ImportError:  # pragma: no cover - loaded by file path
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from envace_verl.client import EnvaceClient  # type: ignore

_BLOCK = re.compile(r"<tool_call>[\s\S]*?</tool_call>|<tool_response>\n?([\s\S]*?)\n?</tool_response>")
_MARKERS = re.compile(r"<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>")


def _clean(text: str) -> str:
    """Text between blocks without chat markers and the bare role words they leave behind."""
    t = _MARKERS.sub("\n", text)
    t = re.sub(r"(^|\n)\s*(assistant|user)\s*(?=\n|$)", "\n", t)
    return t.strip()


def messages_from_response(solution_str: str) -> list[dict]:
    """Chat messages of a decoded multi-turn response: assistant turns (their text and <tool_call> blocks,
    as the lab's Act text) and one tool message per <tool_response>."""
    messages: list[dict] = []
    pending: list[str] = []  # the current assistant turn's pieces

    def flush() -> None:
        text = "\n".join(p for p in pending if p)
        if pending:
            messages.append({"role": "assistant", "content": text})
        pending.clear()

    pos = 0
    for m in _BLOCK.finditer(solution_str):
        between = _clean(solution_str[pos:m.start()])
        pos = m.end()
        if m.group(0).startswith("<tool_call>"):
            if between:
                pending.append(between)
            pending.append(m.group(0))
        else:
            if between and pending:
                pending.append(between)
            flush()
            messages.append({"role": "tool", "content": m.group(1)})
    tail = _clean(solution_str[pos:])
    if tail or pending:
        pending.append(tail)
        flush()
    return messages


def compute_score(data_source: Any, solution_str: str, ground_truth: Any, extra_info: Optional[dict] = None, **kwargs) -> float:
    task_id = (extra_info or {}).get("task_id") or ground_truth
    client = EnvaceClient(os.environ.get("ENVACE_URL", "http://127.0.0.1:8765"))
    mode = os.environ.get("ENVACE_REWARD", "real")
    messages = messages_from_response(solution_str)
    ep = client.create_episode(str(task_id))["episode_id"]
    try:
        if mode == "judge":
            r = client.score(ep, imagined=messages)
        else:
            r = client.score(ep, messages=messages, replay=True)
        return float(r["reward"])
    finally:
        client.release(ep)
