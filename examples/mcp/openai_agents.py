"""The pve-sandbox tools in an OpenAI Agents SDK agent (pip install openai-agents).

    PVS_URL=http://127.0.0.1:8787 PVS_TOKEN=... python3 openai_agents.py
"""
import asyncio
import os

from agents import Agent, Runner
from agents.mcp import MCPServerStreamableHttp


async def main() -> None:
    async with MCPServerStreamableHttp(
        name="pve-sandbox",
        params={
            "url": os.environ.get("PVS_URL", "http://127.0.0.1:8787") + "/mcp",
            "headers": {"Authorization": "Bearer " + os.environ["PVS_TOKEN"]},
            "timeout": 30,
        },
        client_session_timeout_seconds=120,
    ) as sandbox:
        agent = Agent(
            name="coder",
            instructions="Work in a pve-sandbox sandbox; destroy it when you are done.",
            mcp_servers=[sandbox],
        )
        result = await Runner.run(agent, "Create a sandbox, write hello.py printing 42, run it, "
                                         "report the output, then destroy the sandbox.")
        print(result.final_output)


asyncio.run(main())
