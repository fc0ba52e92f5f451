"""litellm.main stand-in: completion() over openai.OpenAI, ModelResponse, Usage (see __init__.py)."""

import os
from typing import Any, Optional

import openai

_PREFIXES = ("openai/", "litellm_proxy/", "hosted_vllm/", "custom_openai/")
# What completion() forwards to chat.completions.create; the rest (litellm's own knobs) is dropped, as
# litellm does with drop_params=True.
_FORWARD = ("temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "n")
_clients: dict = {}


class Usage:
    def __init__(self, prompt_tokens: int = 0, completion_tokens: int = 0, total_tokens: Optional[int] = None):
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.total_tokens = prompt_tokens + completion_tokens if total_tokens is None else total_tokens


class ModelResponse:
    """The openai ChatCompletion, with litellm's dict-style get() and to_dict()."""

    def __init__(self, raw: Any):
        self._raw = raw
        self.id = raw.id
        self.model = raw.model
        self.choices = raw.choices
        u = raw.usage
        self.usage = Usage(u.prompt_tokens, u.completion_tokens, u.total_tokens) if u is not None else None

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)

    def to_dict(self) -> dict:
        return self._raw.model_dump()


def _client(base_url: Optional[str], api_key: Optional[str], max_retries: int) -> openai.OpenAI:
    key = (base_url, api_key, max_retries)
    if key not in _clients:
        _clients[key] = openai.OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none", max_retries=max_retries, timeout=600)
    return _clients[key]


def completion(model: str, messages: list, tools: Optional[list] = None, tool_choice: Any = None, **kwargs: Any) -> ModelResponse:
    for p in _PREFIXES:
        if model.startswith(p):
            model = model[len(p):]
            break
    base_url = kwargs.get("api_base") or kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL")
    client = _client(base_url, kwargs.get("api_key"), int(kwargs.get("num_retries") or 0))
    args = {k: kwargs[k] for k in _FORWARD if kwargs.get(k) is not None}
    if tools:
        args["tools"] = tools
        if tool_choice is not None:
            args["tool_choice"] = tool_choice
    return ModelResponse(client.chat.completions.create(model=model, messages=messages, **args))


def completion_cost(completion_response: Any = None, **kwargs: Any) -> float:
    return 0.0
