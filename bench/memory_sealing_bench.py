"""CPU time of long-term memory writes and searches with encryption on against off.

Issue 35: sealed memory (docs/encryption.md, "Long-term memory") tokenizes each text with
the index's FTS5 tokenizer, makes one HMAC per word and seals four values per write; a
text search makes the query's tokens; a vector search opens every embedding of the
namespace when it loads its matrix. This measures what that costs in CPU (the figure the
shared machine's load disturbs least), clear and sealed alternated in one process:

- ``put``: single-entry writes (``LongTermMemory.put``, one transaction each);
- ``put_many``: the corpus loaded 500 entries per transaction;
- ``text``: 20 different 2-3 word text searches (limit 10);
- ``vector warm``: 20 vector searches with the namespace's matrix in memory;
- ``vector cold``: the first vector search after a write (loads, and opens, the matrix).

Corpus as bench/memory_bench.py's (Zipf-like 5,000-word vocabulary, 12-24 words per entry).
Prints one JSON line per measurement; ``--append-results`` appends a table to
bench/RESULTS.md.

    .venv/bin/python bench/memory_sealing_bench.py [--entries 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_bench import corpus, vocabulary  # noqa: E402

from agentctl.ids import SystemClock  # noqa: E402
from agentctl.memory import LocalHashEmbedder, LongTermMemory  # noqa: E402
from agentctl.store import encryption_repo  # noqa: E402
from agentctl.store.engine import Store, open_store  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def cpu_ms(call: Callable[[], Any]) -> float:
    start = time.process_time()
    call()
    return (time.process_time() - start) * 1000


def one_round(
    store: Store, entries: list[Any], queries: list[str], namespace: str
) -> dict[str, float]:
    memory = LongTermMemory(store, SystemClock(), LocalHashEmbedder())
    out: dict[str, float] = {}
    out["put_many per entry"] = sum(
        cpu_ms(lambda chunk=entries[i : i + 500]: memory.put_many(namespace, chunk))
        for i in range(0, len(entries), 500)
    ) / len(entries)
    singles = entries[:200]
    out["put per entry"] = sum(
        cpu_ms(lambda k=k, e=e: memory.put(namespace, f"single-{k}", e)) for k, e in singles
    ) / len(singles)
    out["text per query"] = statistics.median(
        cpu_ms(lambda q=q: memory.search(namespace, q, mode="text")) for q in queries
    )
    out["vector cold"] = cpu_ms(lambda: memory.search(namespace, queries[0], mode="vector"))
    out["vector warm per query"] = statistics.median(
        cpu_ms(lambda q=q: memory.search(namespace, q, mode="vector")) for q in queries
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--append-results", action="store_true")
    args = parser.parse_args()
    rng = random.Random(35)
    words = vocabulary(rng, 5000)
    entries = corpus(rng, words, args.entries)
    queries = [" ".join(rng.sample(words[:2000], rng.randint(2, 3))) for _ in range(20)]
    os.environ["BENCH_MEMORY_KEY"] = base64.b64encode(os.urandom(32)).decode()
    load_before = os.getloadavg()
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {
            "off": open_store(str(Path(tmp) / "clear.db")),
            "on": open_store(str(Path(tmp) / "sealed.db")),
        }
        encryption_repo.seal_under(stores["on"], "bench", "BENCH_MEMORY_KEY", rotating=False)
        try:
            for round_ in range(args.rounds):
                for mode in ("off", "on") if round_ % 2 == 0 else ("on", "off"):
                    figures = one_round(stores[mode], entries, queries, f"round{round_}")
                    for name, value in figures.items():
                        samples.setdefault((name, mode), []).append(value)
                        line = {"round": round_, "encryption": mode, name: round(value, 3)}
                        print(json.dumps(line))
        finally:
            for store in stores.values():
                store.close()
    load_after = os.getloadavg()
    names = list(dict.fromkeys(name for name, _ in samples))
    rows = []
    for name in names:
        off = statistics.median(samples[(name, "off")])
        on = statistics.median(samples[(name, "on")])
        rows.append(f"| {name} | {off:.3f} | {on:.3f} | {100 * (on - off) / off:+.0f} % |")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    table = "\n".join(
        [
            "| operation | CPU ms, off | CPU ms, on | on vs off |",
            "| --- | ---: | ---: | ---: |",
            *rows,
        ]
    )
    load = (
        f"load average {load_before[0]:.1f} / {load_before[1]:.1f} / {load_before[2]:.1f} "
        f"before, {load_after[0]:.1f} / {load_after[1]:.1f} / {load_after[2]:.1f} after"
    )
    print(table)
    print(load)
    if args.append_results:
        with RESULTS.open("a") as out:
            out.write(
                f"\n## Sealed long-term memory: CPU time with encryption on against off "
                f"({stamp})\n\n"
                f"`python bench/memory_sealing_bench.py --entries {args.entries} --rounds "
                f"{args.rounds}`: medians over {args.rounds} alternated rounds, each loading "
                f"{args.entries} entries into a fresh namespace; {load}.\n\n{table}\n"
            )


if __name__ == "__main__":
    main()
