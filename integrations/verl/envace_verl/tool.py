"""verl `BaseTool` adapter for the EnvACE Lab environment server.

One class serves every retail tool: the tool-config YAML (config/envace_retail_tools.yaml) lists the 15 tools,
each with this class and its JSON schema. All tool objects of a trajectory share one server episode (one task,
one database copy), keyed by the `instance_id` verl passes to `create` (verl's multi-turn SGLang rollout passes
the request id of the trajectory to every tool); a reference count releases the episode when the last tool
object of the trajectory releases it.

Modes (the tool config's `config.mode`):
  real      the call runs in the server's real environment; the observation is the lab's observation text.
  simulate  the call is answered by an LLM simulator: the server builds the lab's Rehearse prompt (the task's
            grounding, the imagined conversation so far), an OpenAI-compatible /v1/completions endpoint
            (`simulator_url`, `simulator_model`) writes the rehearsal, and the server parses it with the lab's
            strict reader. A frozen base model behind that endpoint is EnvACE's frozen-simulator baseline; the
            policy's own inference server behind it is world rehearsal (its Rehearse rows then need the
            role-wise advantage in the trainer: see the README).

verl is imported when present; without it a minimal stand-in base class with the same interface is used, so
the adapter is testable with the standard library alone.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any, Optional
from uuid import uuid4

from .client import EnvaceClient

try:  # verl present: subclass its BaseTool and answer with its ToolResponse when it has one
    from verl.tools.base_tool import BaseTool  # type: ignore

    try:
        from verl.tools.schemas import ToolResponse  # type: ignore
    except ImportError:  # older verl: execute returns (str, reward, metrics)
        ToolResponse = None  # type: ignore
    HAVE_VERL = True
except ImportError:
    HAVE_VERL = False
    ToolResponse = None  # type: ignore

    class BaseTool:  # type: ignore[no-redef]
        """Stand-in with verl's BaseTool interface (create / execute / calc_reward / release)."""

        def __init__(self, config: dict, tool_schema: Any):
            self.config = config
            self.tool_schema = tool_schema
            self.name = _schema_name(tool_schema)

        def get_openai_tool_schema(self) -> Any:
            return self.tool_schema


def _schema_name(schema: Any) -> str:
    if isinstance(schema, dict):
        return schema["function"]["name"]
    return schema.function.name


def format_call(name: str, arguments: Any) -> str:
    """The Act text the lab writes for a call (src/env/toolcall.ts formatCall)."""
    return '<tool_call>\n{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ' + json.dumps(arguments, ensure_ascii=False) + "}\n</tool_call>"


class _Episode:
    def __init__(self, episode_id: str, task_id: str):
        self.episode_id = episode_id
        self.task_id = task_id
        self.refs = 0
        # The conversation the policy saw (simulate mode): assistant call texts and tool observations.
        self.history: list[dict] = []
        self.rehearse_invalid = False


class EnvaceTool(BaseTool):
    _episodes: dict[str, _Episode] = {}
    _lock = threading.Lock()

    def __init__(self, config: dict, tool_schema: Any):
        super().__init__(config, tool_schema)
        if not getattr(self, "name", None):
            self.name = _schema_name(tool_schema)
        self.mode = config.get("mode", "real")
        if self.mode not in ("real", "simulate"):
            raise ValueError(f"EnvaceTool: mode must be 'real' or 'simulate', got {self.mode!r}")
        self.client = EnvaceClient(config.get("base_url", "http://127.0.0.1:8765"), float(config.get("timeout", 30)),
                                   token=config.get("token"), token_file=config.get("token_file"))
        self.simulator_url = config.get("simulator_url")
        self.simulator_model = config.get("simulator_model", "")
        self.max_rehearse_tokens = int(config.get("max_rehearse_tokens", 512))
        self.temperature = float(config.get("temperature", 1.0))
        self.rehearse_options = config.get("rehearse_options") or None
        if self.mode == "simulate" and not self.simulator_url:
            raise ValueError("EnvaceTool: mode 'simulate' needs config.simulator_url (an OpenAI-compatible server)")

    # ---- verl's interface

    async def create(self, instance_id: Optional[str] = None, **kwargs) -> Any:
        """Opens (or joins) the trajectory's episode. The task comes from `task_id`, directly or inside
        `create_kwargs` (verl's tools_kwargs[tool]["create_kwargs"] of the dataset row)."""
        create_kwargs = kwargs.get("create_kwargs") or {}
        task_id = kwargs.get("task_id", create_kwargs.get("task_id"))
        key = instance_id or str(uuid4())
        with self._lock:
            ep = self._episodes.get(key)
            if ep is None:
                if not task_id:
                    raise ValueError("EnvaceTool.create needs task_id (put it in the row's tools_kwargs create_kwargs)")
                r = self.client.create_episode(task_id)
                ep = _Episode(r["episode_id"], task_id)
                self._episodes[key] = ep
            ep.refs += 1
        # verl's BaseTool.create returns (instance_id, ToolResponse) (pinned commit, see agent_loop.py).
        return key, (ToolResponse() if ToolResponse is not None else None)

    async def execute(self, instance_id: str, parameters: Any, **kwargs) -> tuple[Any, float, dict]:
        ep = self._episode(instance_id)
        if isinstance(parameters, str):  # verl hands over parsed arguments; be lenient with a JSON string
            try:
                parameters = json.loads(parameters)
            except ValueError:
                pass
        if self.mode == "real":
            r = self.client.call(ep.episode_id, self.name, parameters)
            text, metrics = r["observation"], {"ok": r["ok"], "code": r["code"], "done": r["done"]}
        else:
            text, metrics = self._simulate(ep, parameters)
        ep.history.append({"role": "assistant", "content": format_call(self.name, parameters)})
        ep.history.append({"role": "tool", "content": text})
        return self._response(text), 0.0, metrics

    async def calc_reward(self, instance_id: str, **kwargs) -> float:
        """real: the lab's real reward of the episode's database, with the replies in kwargs["messages"]
        when verl passes the conversation; simulate: the checklist judge of the imagined trajectory."""
        ep = self._episode(instance_id)
        if self.mode == "real":
            return float(self.client.score(ep.episode_id, messages=kwargs.get("messages"))["reward"])
        if ep.rehearse_invalid:
            return 0.0
        imagined = kwargs.get("messages") or ep.history
        return float(self.client.score(ep.episode_id, imagined=imagined)["reward"])

    async def release(self, instance_id: str, **kwargs) -> None:
        with self._lock:
            ep = self._episodes.get(instance_id)
            if ep is None:
                return
            ep.refs -= 1
            if ep.refs > 0:
                return
            del self._episodes[instance_id]
        self.client.release(ep.episode_id)

    # ---- helpers

    def _episode(self, instance_id: str) -> _Episode:
        ep = self._episodes.get(instance_id)
        if ep is None:
            raise KeyError(f"EnvaceTool: no episode for instance {instance_id!r} (create it first)")
        return ep

    @staticmethod
    def _response(text: str) -> Any:
        return ToolResponse(text=text) if ToolResponse is not None else text

    def _simulate(self, ep: _Episode, parameters: Any) -> tuple[str, dict]:
        if not isinstance(parameters, dict):
            # Not even a call: the lab answers with an error observation, never with the simulator.
            r = self.client.call(ep.episode_id, self.name, parameters)
            return r["observation"], {"ok": False, "code": r["code"], "rehearsed": False}
        prompt = self.client.rehearse_prompt(ep.episode_id, self.name, parameters, self.rehearse_options, history=ep.history)["prompt"]
        body = json.dumps({
            "model": self.simulator_model, "prompt": prompt, "max_tokens": self.max_rehearse_tokens,
            "temperature": self.temperature, "stop": ["</execution_result>"],
        }).encode("utf-8")
        req = urllib.request.Request(self.simulator_url.rstrip("/") + "/v1/completions", data=body, method="POST")
        req.add_header("content-type", "application/json")
        with urllib.request.urlopen(req, timeout=self.client.timeout) as res:
            text = json.loads(res.read().decode("utf-8"))["choices"][0]["text"]
        if "</execution_result>" not in text:  # servers drop the stop string from the output
            text += "</execution_result>"
        parsed = self.client.parse_rehearsal(ep.episode_id, text, self.name)
        if parsed["ok"]:
            return parsed["observation"], {"ok": True, "rehearsed": True}
        # The lab ends such an episode with reward 0; a tool cannot end verl's loop, so calc_reward returns 0.
        ep.rehearse_invalid = True
        err = parsed["error"]
        return json.dumps({"error": f"invalid rehearsal ({err['code']})"}), {"ok": False, "rehearsed": True, "invalid": err["code"]}
