"""The verl adapter against a live EnvACE Lab server (standard library only).

ENVACE_URL is the server; ENVACE_TASKS a JSON file of the served tasks with their reference actions and the
observations `npm run env -- replay` gives for them. test/server/python.test.ts starts the server, writes the
file and runs `python3 -m unittest` here; without ENVACE_URL the live tests are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import unittest
from http.server import BaseHTTPRequestHandler, HTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from envace_verl import EnvaceClient, EnvaceError, EnvaceTool, HAVE_VERL, compute_score, format_call, messages_from_response  # noqa: E402

URL = os.environ.get("ENVACE_URL")
TASKS = json.load(open(os.environ["ENVACE_TASKS"])) if os.environ.get("ENVACE_TASKS") else []


def run(coro):
    return asyncio.run(coro)


def tools_for(client: EnvaceClient, config: dict) -> dict:
    return {t["function"]["name"]: EnvaceTool(config, t) for t in client.tools()}


def qwen_response(task: dict, reply: str, special: bool = True) -> str:
    """A decoded multi-turn response as verl's agent loop produces it (Qwen chat markup)."""
    s = ""
    for a in task["actions"]:
        s += format_call(a["name"], a["arguments"]) + "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + a["observation"] + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    s += reply + "<|im_end|>"
    if not special:
        for m in ("<|im_start|>", "<|im_end|>"):
            s = s.replace(m, "")
    return s


class OfflineTests(unittest.TestCase):
    def test_imports_without_verl(self):
        # verl and torch are not installed here: the stand-in base class is used.
        self.assertIsInstance(HAVE_VERL, bool)
        self.assertTrue(hasattr(EnvaceTool, "create") and hasattr(EnvaceTool, "calc_reward"))

    def test_messages_from_response(self):
        text = '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{"result":1}\n</tool_response><|im_end|>\n<|im_start|>assistant\nDone, 12.<|im_end|>'
        self.assertEqual(messages_from_response(text), [
            {"role": "assistant", "content": '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>'},
            {"role": "tool", "content": '{"result":1}'},
            {"role": "assistant", "content": "Done, 12."},
        ])
        self.assertEqual(messages_from_response(text.replace("<|im_start|>", "").replace("<|im_end|>", "")), messages_from_response(text))

    def test_format_call_matches_the_lab(self):
        self.assertEqual(format_call("f", {"a": [1, "é"], "b": {"c": None}}), '<tool_call>\n{"name": "f", "arguments": {"a": [1, "é"], "b": {"c": null}}}\n</tool_call>')


@unittest.skipUnless(URL and TASKS, "needs a live server (ENVACE_URL) and its tasks (ENVACE_TASKS)")
class LiveTests(unittest.TestCase):
    def setUp(self):
        self.client = EnvaceClient(URL)
        self.config = {"base_url": URL, "mode": "real"}

    def test_health_and_tasks(self):
        self.assertEqual(self.client.health()["status"], "ok")
        ids = self.client.task_ids("train")
        for t in TASKS:
            self.assertIn(t["id"], ids)
        self.assertEqual(len(self.client.tools()), 15)

    def test_trajectory_create_execute_calc_reward_release(self):
        tools = tools_for(self.client, self.config)
        for task in TASKS:
            iid = "traj-" + task["id"]
            used = sorted({a["name"] for a in task["actions"]})
            for name in used:  # every tool object of the trajectory joins the same episode
                self.assertEqual(run(tools[name].create(iid, task_id=task["id"]))[0], iid)
            ep = EnvaceTool._episodes[iid].episode_id
            for a in task["actions"]:
                resp, step_reward, metrics = run(tools[a["name"]].execute(iid, a["arguments"]))
                self.assertEqual(getattr(resp, "text", resp), a["observation"])
                self.assertEqual(step_reward, 0.0)
            self.assertEqual(self.client.episode(ep)["db_hash"], task["hash"])
            reply = [{"role": "assistant", "content": "Done. " + " ".join(task["facts"])}]
            self.assertEqual(run(tools[used[0]].calc_reward(iid, messages=reply)), 1.0)
            for name in used:
                run(tools[name].release(iid))
            with self.assertRaises(EnvaceError) as e:
                self.client.episode(ep)
            self.assertEqual(e.exception.status, 404)

    def test_trajectories_are_isolated_and_bad_calls_are_error_observations(self):
        tools = tools_for(self.client, self.config)
        task = next(t for t in TASKS if t["writes"])
        a, b = "iso-a", "iso-b"
        for iid in (a, b):
            for tool in tools.values():
                run(tool.create(iid, task_id=task["id"]))
        h0 = self.client.episode(EnvaceTool._episodes[b].episode_id)["db_hash"]
        for x in task["actions"]:
            run(tools[x["name"]].execute(a, x["arguments"]))
        self.assertEqual(self.client.episode(EnvaceTool._episodes[b].episode_id)["db_hash"], h0)
        self.assertNotEqual(self.client.episode(EnvaceTool._episodes[a].episode_id)["db_hash"], h0)
        resp, _, metrics = run(tools["cancel_pending_order"].execute(b, {"order_id": 5}))
        self.assertFalse(metrics["ok"])
        self.assertIn("error", json.loads(getattr(resp, "text", resp)))
        self.assertEqual(self.client.episode(EnvaceTool._episodes[b].episode_id)["db_hash"], h0)
        for iid in (a, b):
            for tool in tools.values():
                run(tool.release(iid))
        self.assertNotIn(a, EnvaceTool._episodes)

    def test_tool_config_yaml_builds_the_servers_tools(self):
        try:
            import yaml  # Debian's python3-yaml; verl itself loads this file with OmegaConf
        except ImportError:
            self.skipTest("no PyYAML (Debian package python3-yaml)")
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for mode in ("real", "simulate"):
            cfg = yaml.safe_load(open(os.path.join(here, "config", f"envace_mini_tools_{mode}.yaml")))
            tools = [EnvaceTool(dict(t["config"], base_url=URL), t["tool_schema"]) for t in cfg["tools"]]
            self.assertEqual([t.tool_schema for t in tools], self.client.tools())
            self.assertEqual({t.mode for t in tools}, {mode})

    def test_agent_loop_style_create_returns_a_pair(self):
        tool = tools_for(self.client, self.config)["get_user_details"]
        iid, _ = run(tool.create(create_kwargs={"task_id": TASKS[0]["id"]}))
        resp, _, metrics = run(tool.execute(iid, {"user_id": "nobody"}))
        self.assertFalse(metrics["ok"])
        run(tool.release(iid))

    def test_simulate_mode_uses_the_labs_rehearse_prompt_and_parser(self):
        seen: list[dict] = []
        replies = ['<execution_result>\n{"result":"simulated"}\n', "no tags at all"]

        class Fake(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                seen.append(body)
                out = json.dumps({"choices": [{"text": replies[min(len(seen) - 1, 1)]}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        sim = HTTPServer(("127.0.0.1", 0), Fake)
        threading.Thread(target=sim.serve_forever, daemon=True).start()
        try:
            config = {"base_url": URL, "mode": "simulate", "simulator_url": f"http://127.0.0.1:{sim.server_port}", "simulator_model": "frozen"}
            tools = tools_for(self.client, config)
            task = TASKS[0]
            act = task["actions"][0]
            iid = "sim-1"
            run(tools[act["name"]].create(iid, task_id=task["id"]))
            ep = EnvaceTool._episodes[iid].episode_id
            want_prompt = self.client.rehearse_prompt(ep, act["name"], act["arguments"], history=[])["prompt"]
            resp, _, metrics = run(tools[act["name"]].execute(iid, act["arguments"]))
            self.assertEqual(getattr(resp, "text", resp), '{"result":"simulated"}')
            self.assertEqual(seen[0]["prompt"], want_prompt)
            self.assertEqual(seen[0]["stop"], ["</execution_result>"])
            # The second rehearsal's prompt carries the imagined conversation.
            resp2, _, metrics2 = run(tools[act["name"]].execute(iid, act["arguments"]))
            self.assertIn('"simulated"', seen[1]["prompt"])
            self.assertEqual(metrics2["invalid"], "no-open-tag")
            self.assertEqual(run(tools[act["name"]].calc_reward(iid)), 0.0)  # an invalid rehearsal scores 0, as in the lab
            # The real database was never touched.
            self.assertEqual(self.client.episode(ep)["turns"], 0)
            run(tools[act["name"]].release(iid))
        finally:
            sim.shutdown()
            sim.server_close()

    def test_schemas_are_enforced_by_the_server(self):
        # verl's OpenAIFunctionToolSchema (pinned commit) keeps type/description/enum of each property and drops
        # items, maxItems, maxLength and additionalProperties: the policy never sees them, so the server checks
        # every call against the full schema. Calls that break only the dropped keywords are refused, database untouched.
        tools = tools_for(self.client, {"base_url": URL, "mode": "real"})
        task = TASKS[0]
        iid = "schema-1"
        run(tools["return_delivered_order_items"].create(iid, task_id=task["id"]))
        ep = EnvaceTool._episodes[iid].episode_id
        h0 = self.client.episode(ep)["db_hash"]
        base = {"order_id": "#W0000000", "payment_method_id": "gift_card_0000000"}
        for args, word in [
            ({**base, "item_ids": [1, 2]}, "string"),                   # items.type
            ({**base, "item_ids": ["1"] * 21}, "20"),                   # maxItems
            ({**base, "item_ids": ["x" * 41]}, "40"),                   # items.maxLength
            ({**base, "item_ids": ["1"], "note": "extra"}, "note"),     # additionalProperties: false
        ]:
            resp, _, metrics = run(tools["return_delivered_order_items"].execute(iid, args))
            self.assertEqual(metrics["code"], "invalid_arguments", args)
            self.assertIn(word, getattr(resp, "text", resp))
        self.assertEqual(self.client.episode(ep)["db_hash"], h0)
        run(tools["return_delivered_order_items"].release(iid))

    def test_reward_function(self):
        os.environ["ENVACE_URL"] = URL
        for task in TASKS:
            reply = "Done. " + " ".join(task["facts"])
            for special in (True, False):
                text = qwen_response(task, reply, special)
                os.environ["ENVACE_REWARD"] = "real"
                self.assertEqual(compute_score("envace/retail", text, task["id"], {"task_id": task["id"]}), 1.0)
                os.environ["ENVACE_REWARD"] = "judge"
                self.assertEqual(compute_score("envace/retail", text, task["id"], {"task_id": task["id"]}), 1.0)
            if task["facts"]:
                os.environ["ENVACE_REWARD"] = "real"
                self.assertEqual(compute_score("envace/retail", qwen_response(task, "Done."), task["id"], {"task_id": task["id"]}), 0.0)
        os.environ.pop("ENVACE_REWARD", None)


if __name__ == "__main__":
    unittest.main()
