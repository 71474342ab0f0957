"""A terminal round trip with Debian's python3-websockets (a client nobody here wrote).

usage: ws_terminal_client.py WS_URL TOKEN
Authenticates with the subprotocol "bearer.<token>" (as a browser would), types a command as
binary bytes, waits for its output, sends a resize message and prints "ok <subprotocol>".
"""
import asyncio
import sys

import websockets


async def main(url, token):
    async with websockets.connect(
        url, subprotocols=["pvs-terminal", "bearer." + token], max_size=None
    ) as ws:
        await ws.send(b"echo py-$((3*4))\r")
        seen = b""
        while b"py-12" not in seen:
            message = await asyncio.wait_for(ws.recv(), 10)
            if isinstance(message, bytes):
                seen += message
        await ws.send('{"type":"resize","cols":77,"rows":22}')
        await asyncio.sleep(0.2)
        print("ok", ws.subprotocol)


asyncio.run(main(sys.argv[1], sys.argv[2]))
