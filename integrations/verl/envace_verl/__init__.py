"""EnvACE Lab adapters for verl: the environment server's client, a BaseTool, a reward function."""

from .client import EnvaceClient, EnvaceError
from .tool import HAVE_VERL, EnvaceTool, format_call
from .reward import compute_score, messages_from_response

__all__ = ["EnvaceClient", "EnvaceError", "EnvaceTool", "HAVE_VERL", "compute_score", "format_call", "messages_from_response"]
