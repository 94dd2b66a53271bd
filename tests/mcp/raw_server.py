"""An MCP server spoken by hand over stdio, for replies the SDK's server never sends.

``garble`` is answered first with a line that is not JSON, then with a result that is not a
tools/call result; ``lookup`` is answered properly. With ``--linger`` it outlives its standard
input.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TOOLS = [
    {"name": name, "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    for name in ("garble", "lookup")
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        method, ident = request.get("method"), request.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call" and request["params"]["name"] == "garble":
            sys.stdout.write("this is not JSON-RPC\n")
            result = {"content": "not a list"}
        elif method == "tools/call":
            city = request["params"]["arguments"]["city"]
            result = {
                "content": [{"type": "text", "text": city}],
                "structuredContent": {"city": city, "sky": "sunny"},
            }
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}})
            continue
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
    if "--linger" in sys.argv:  # a server that does not notice its standard input closing
        print(os.getpid(), "lingers", file=sys.stderr, flush=True)
        time.sleep(600)
