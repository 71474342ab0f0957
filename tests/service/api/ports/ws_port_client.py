"""A WebSocket through the port proxy with Debian's python3-websockets (a client nobody here
wrote), against ws_echo_server.py in the sandbox.

usage: ws_port_client.py WS_URL TOKEN
Authenticates with the subprotocol "bearer.<token>" (as a browser would), reads the service's
first message (what it received), sends a text and a 1 MiB binary message and checks both come
back whole, then prints JSON: the negotiated subprotocol and what the service received.
"""
import asyncio
import json
import os
import sys

import websockets


async def main(url, token):
    async with websockets.connect(
        url, subprotocols=["echo", "bearer." + token], max_size=None
    ) as ws:
        seen = json.loads(await asyncio.wait_for(ws.recv(), 10))
        await ws.send("hello through the proxy")
        if await asyncio.wait_for(ws.recv(), 10) != "hello through the proxy":
            sys.exit("the text message came back changed")
        blob = os.urandom(1 << 20)
        await ws.send(blob)
        if await asyncio.wait_for(ws.recv(), 30) != blob:
            sys.exit("the binary message came back changed")
        print(json.dumps({"subprotocol": ws.subprotocol, "seen": seen}))


asyncio.run(main(sys.argv[1], sys.argv[2]))
