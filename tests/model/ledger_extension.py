"""The model test's process extension (stdlib only; agentctl runs it with a cleared
environment in the workspace): ``ledger_extension.py LABEL --agentctl-handshake|--agentctl-invoke``.

An invoke appends ``<marker> LABEL <agentctl pid>`` to ledger.txt, like the workflows' shell
steps, and answers ``{"stdout": marker}`` so the effect's result names the line it wrote.
"""

from __future__ import annotations

import json
import os
import sys
import uuid


def main(label: str, flag: str) -> int:
    if flag == "--agentctl-handshake":
        json.dump(
            {
                "protocolVersion": "agentctl.dev/process-extension/v1",
                "name": "ledger",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object"},
                "capabilities": ["ledger"],
            },
            sys.stdout,
        )
        return 0
    request = json.load(sys.stdin)
    marker = str(uuid.uuid4())
    with open("ledger.txt", "a", encoding="utf-8") as ledger:
        ledger.write(f"{marker} {label} {os.getppid()}\n")
    json.dump(
        {
            "protocolVersion": request["protocolVersion"],
            "effectId": request["effectId"],
            "output": {"stdout": marker + "\n"},
        },
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
