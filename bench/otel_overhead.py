"""W1 (500 sequential durable steps) with and without OpenTelemetry, in one process.

Telemetry is switched on exactly as the CLI does (``telemetry.activate`` with
``OTEL_EXPORTER_OTLP_ENDPOINT``), exporting to a loopback HTTP sink that accepts every
OTLP request; runs alternate off/on so both see the same machine. Prints JSON lines::

    .venv/bin/python bench/otel_overhead.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_bench import w1  # noqa: E402

from agentctl.observability import telemetry  # noqa: E402


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.repeat):
        times["off"].append(float(w1(args.steps)["wall_s"]))
        telemetry.activate({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
        times["on"].append(float(w1(args.steps)["wall_s"]))
        telemetry.shutdown()
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    for mode in ("off", "on"):
        print(
            json.dumps(
                {
                    "bench": "agentctl",
                    "workload": f"W1_otel_{mode}",
                    "wall_s": round(statistics.median(times[mode]), 4),
                    "runs": times[mode],
                }
            )
        )  # noqa: E501
    print(
        json.dumps(
            {"bench": "agentctl", "workload": "W1_otel_overhead", "ratio": round(on / off, 3)}
        )
    )  # noqa: E501
    server.shutdown()


if __name__ == "__main__":
    main()
