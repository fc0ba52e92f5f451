"""A small client of the EnvACE Lab environment server's JSON API (`npm run serve`; the routes are listed in
src/server/http.ts). Standard library only, so it runs wherever verl runs without new dependencies."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any, Optional


class EnvaceError(RuntimeError):
    """A request the server refused: `status` is the HTTP status, `code` the server's error word."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def _token(token: Optional[str], token_file: Optional[str]) -> Optional[str]:
    """The server's bearer token: given, read from a file, or ENVACE_TOKEN / ENVACE_TOKEN_FILE (a server bound
    beyond loopback requires one)."""
    if token:
        return token
    path = token_file or os.environ.get("ENVACE_TOKEN_FILE")
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    return os.environ.get("ENVACE_TOKEN") or None


class EnvaceClient:
    def __init__(self, base_url: str = "http://127.0.0.1:8765", timeout: float = 30.0,
                 token: Optional[str] = None, token_file: Optional[str] = None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.token = _token(token, token_file)

    def _request(self, method: str, path: str, body: Optional[dict] = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if self.token:
            req.add_header("authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as res:
                return json.loads(res.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raw = e.read().decode("utf-8", "replace")
            try:
                err = json.loads(raw)["error"]
                raise EnvaceError(e.code, err.get("code", "error"), err.get("message", raw)) from None
            except (ValueError, KeyError, TypeError):
                raise EnvaceError(e.code, "error", raw) from None

    # ---- the API, one method per route

    def health(self) -> dict:
        return self._request("GET", "/health")

    def task_ids(self, split: Optional[str] = None) -> list[str]:
        return self._request("GET", "/tasks" + (f"?split={split}" if split else ""))["task_ids"]

    def tools(self) -> list[dict]:
        return self._request("GET", "/tools")["tools"]

    def create_episode(self, task_id: str) -> dict:
        """{"episode_id", "task_id", "tools", "messages", "prompt"}"""
        return self._request("POST", "/episodes", {"task_id": task_id})

    def episode(self, episode_id: str) -> dict:
        return self._request("GET", f"/episodes/{episode_id}")

    def call(self, episode_id: str, name: Any, arguments: Any) -> dict:
        """{"observation", "ok", "error", "code", "done"}: `observation` is the text the policy reads."""
        return self._request("POST", f"/episodes/{episode_id}/calls", {"name": name, "arguments": arguments})

    def rehearse_prompt(self, episode_id: str, name: str, arguments: dict, options: Optional[dict] = None,
                        history: Optional[list] = None) -> dict:
        """The lab's Rehearse prompt; `history` (chat messages) replaces the episode's own conversation."""
        body: dict = {"name": name, "arguments": arguments}
        if options:
            body["options"] = options
        if history is not None:
            body["history"] = history
        return self._request("POST", f"/episodes/{episode_id}/rehearse-prompt", body)

    def parse_rehearsal(self, episode_id: str, text: str, name: str) -> dict:
        return self._request("POST", f"/episodes/{episode_id}/parse-rehearsal", {"text": text, "name": name})

    def score(self, episode_id: str, messages: Optional[list] = None, imagined: Optional[list] = None,
              replay: bool = False, terminated: bool = False) -> dict:
        body: dict = {}
        if messages is not None:
            body["messages"] = messages
        if imagined is not None:
            body["imagined"] = imagined
        if replay:
            body["replay"] = True
        if terminated:
            body["terminated"] = True
        return self._request("POST", f"/episodes/{episode_id}/score", body)

    def act(self, episode_id: str, text: str, mode: str = "real") -> dict:
        """Applies one raw Act generation through the lab's Episode: {"done", "end", "turns", "tool_messages",
        "continuation", "rehearse"} (`rehearse`: simulate mode's pending call and its Rehearse prompt)."""
        return self._request("POST", f"/episodes/{episode_id}/act", {"text": text, "mode": mode})

    def rehearse(self, episode_id: str, text: str) -> dict:
        """Applies the raw Rehearse generation of the pending call (simulate mode); same answer as act."""
        return self._request("POST", f"/episodes/{episode_id}/rehearse", {"text": text})

    def score_trajectory(self, episode_id: str) -> dict:
        """The lab's reward of the trajectory built with act/rehearse (real: τ²'s rule; simulate: the judge)."""
        return self._request("POST", f"/episodes/{episode_id}/score", {"trajectory": True})

    def release(self, episode_id: str) -> None:
        try:
            self._request("DELETE", f"/episodes/{episode_id}")
        except EnvaceError as e:
            if e.status != 404:  # already released or expired: nothing to do
                raise
