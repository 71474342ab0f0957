#!/usr/bin/env python3
"""A small coding agent: a model, three tools, one sandbox, a loop.

The model (any OpenAI-compatible chat completions endpoint) gets three tools that act on a
pve-sandbox sandbox: run a command, read a file, write or edit a file. The loop sends the
conversation, runs the tool calls the model asks for, sends back what they returned, and
stops when the model answers without asking for a tool.

    export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... MODEL=gpt-4o-mini
    export PVS_URL=http://127.0.0.1:8080 PVS_TOKEN=pvs_...   # or SANDBOXCTL_URL/_TOKEN
    python3 agent.py "write fizzbuzz.py, run it for 1..15 and show me the output"

Only httpx and the pve_sandbox SDK; no openai package.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional

import httpx

from pve_sandbox import ApprovalRequired, PvsError, Sandbox

MAX_TOOL_OUTPUT = 16_000  # characters of a tool's result the model sees

SYSTEM = """You are a coding agent working in a Linux sandbox (a disposable container).
Use the tools to run commands and to read, write and edit files; use absolute paths.
The sandbox user's home directory is {home}. When the task is done, answer with a short
summary of what you did and what the result is, without calling a tool."""

TOOLS: List[Dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a shell command (sh -c) in the sandbox; returns exit code, "
            "stdout and stderr.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_seconds": {"type": "integer", "description": "default 120"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a whole file (give content), or edit one by replacing the "
            "exact text old_string, which must occur once, by new_string.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                },
                "required": ["path"],
            },
        },
    },
]


def clip(text: str) -> str:
    """Keeps the head and the tail of a long tool result."""
    if len(text) <= MAX_TOOL_OUTPUT:
        return text
    half = MAX_TOOL_OUTPUT // 2
    return (
        text[:half] + f"\n[... {len(text) - MAX_TOOL_OUTPUT} characters cut ...]\n" + text[-half:]
    )


def run_tool(sb: Sandbox, name: str, args: Dict[str, Any]) -> str:
    """Runs one tool call; errors become the result, so the model can correct itself."""
    try:
        if name == "run_command":
            r = sb.commands.run(args["command"], timeout=args.get("timeout_seconds", 120))
            return json.dumps({"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})
        if name == "read_file":
            return sb.files.read(args["path"])
        if name == "write_file":
            if "content" in args:
                w = sb.files.write(args["path"], args["content"])
                return f"wrote {w.size} bytes to {w.path}"
            e = sb.files.edit(args["path"], args["old_string"], args["new_string"])
            return f"edited {e.path}:\n{e.diff}"
        return f"error: no tool named {name}"
    except ApprovalRequired as e:
        # A policy rule wants a person's OK: wait for it, then make the same call with it.
        print(f"  waiting for approval {e.approval.id}: {e.approval.message}", file=sys.stderr)
        try:
            e.approval.wait(timeout=600)
        except (PvsError, TimeoutError) as denied:
            return f"error: not approved: {denied}"
        return run_tool_approved(sb, name, args, e.approval.id)
    except (PvsError, KeyError, UnicodeDecodeError) as e:
        return f"error: {type(e).__name__}: {e}"


def run_tool_approved(sb: Sandbox, name: str, args: Dict[str, Any], approval: str) -> str:
    """The same call as run_tool, presenting the approval."""
    try:
        if name == "run_command":
            r = sb.commands.run(
                args["command"], timeout=args.get("timeout_seconds", 120), approval=approval
            )
            return json.dumps({"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr})
        if "content" in args:
            return f"wrote {sb.files.write(args['path'], args['content'], approval=approval).size} bytes"
        return sb.files.edit(
            args["path"], args["old_string"], args["new_string"], approval=approval
        ).diff
    except PvsError as e:
        return f"error: {type(e).__name__}: {e}"


def chat(client: httpx.Client, model: str, messages: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One chat completion with the tools; returns the assistant's message."""
    r = client.post(
        "/chat/completions", json={"model": model, "messages": messages, "tools": TOOLS}
    )
    r.raise_for_status()
    message: Dict[str, Any] = r.json()["choices"][0]["message"]
    return message


def run_agent(
    task: str,
    sb: Sandbox,
    client: httpx.Client,
    model: str,
    max_steps: int = 30,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> str:
    """The loop: ask the model, run its tool calls, until it answers. Returns the answer."""
    home = sb.commands.run("pwd").stdout.strip()
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": SYSTEM.format(home=home)},
        {"role": "user", "content": task},
    ]
    for _ in range(max_steps):
        message = chat(client, model, messages)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            return str(message.get("content") or "")
        for call in calls:
            name = call["function"]["name"]
            try:
                args = json.loads(call["function"].get("arguments") or "{}")
                log(f"> {name} {json.dumps(args)[:200]}")
                result = clip(run_tool(sb, name, args))
            except json.JSONDecodeError as e:
                result = f"error: arguments are not JSON: {e}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return f"stopped after {max_steps} steps without an answer"


def main(argv: Optional[List[str]] = None) -> int:
    """Command line: the task, and optionally an existing sandbox to work in."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("task")
    p.add_argument("--sandbox", help="work in this existing sandbox (default: a new one)")
    p.add_argument("--keep", action="store_true", help="keep the new sandbox afterwards")
    p.add_argument("--max-steps", type=int, default=30)
    a = p.parse_args(argv)
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    headers = {"Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")}
    model = os.environ.get("MODEL", "gpt-4o-mini")
    with httpx.Client(base_url=base, headers=headers, timeout=300) as client:
        sb = Sandbox.connect(a.sandbox) if a.sandbox else Sandbox.create(ttl=3600, keep=a.keep)
        with sb:
            print(f"sandbox {sb.id}", file=sys.stderr)
            print(run_agent(a.task, sb, client, model, a.max_steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
