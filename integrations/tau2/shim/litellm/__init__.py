"""A minimal stand-in for litellm, over the official `openai` client (EnvACE Lab, scripts/tau2-harness.sh).

litellm is not on this machine's package index, and tau2-bench imports it only in tau2/utils/llm_utils.py
(plus a lazy import in its voice pricing, which the text harness never reaches). This module provides exactly
what that file touches: `completion` (chat with tools, non-streaming), `completion_cost` (always 0.0: a local
endpoint costs nothing), the module attributes it sets (client_session, aclient_session, success_callback,
drop_params, cache) and enable_cache/disable_cache, `litellm.caching.caching.Cache` and
`litellm.main.ModelResponse` / `Usage`. Anything else raises AttributeError, so a tau2 code path this stand-in
does not cover fails loudly instead of running on a guess.

Model names are litellm's "provider/model": the provider prefix (openai/, litellm_proxy/, hosted_vllm/) is
dropped and the rest is sent as `model`. The endpoint is `api_base` (or `base_url`) from the call's keyword
arguments (tau2's --agent-llm-args / --user-llm-args), else OPENAI_BASE_URL; the key is `api_key`, else
OPENAI_API_KEY, else "none" (the lab's endpoint on loopback needs none).
"""

from typing import Any, Optional

from .main import ModelResponse, Usage, completion, completion_cost  # noqa: F401

client_session: Any = None
aclient_session: Any = None
success_callback: list = []
drop_params: bool = True
cache: Optional[Any] = None


def enable_cache() -> None:
    pass


def disable_cache() -> None:
    pass
