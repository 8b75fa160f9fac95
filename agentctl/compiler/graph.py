"""Stable topological order and cycle reporting (docs/compiler.md).

Kahn's algorithm seeded with the tasks that need nothing, in declaration order; a task that
becomes ready is queued before every queued task declared after it. Keeping the queue
sorted by declaration index is exactly that rule, so a heap keyed by the index gives the
order in O((V + E) log V): ``[b, a, c(needs a, b)]`` orders as ``b, a, c``.

The order is the scheduling tie-break and the commit order of parallel batches, so it must
depend only on the declared graph — never on dict iteration or hashing.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

__all__ = ["CycleError", "ancestor_masks", "find_cycle", "stable_order"]


class CycleError(ValueError):
    """The graph has a cycle; ``cycle`` is a closed path such as ``[a, b, a]``."""

    def __init__(self, cycle: list[str]) -> None:
        super().__init__("task dependency cycle: " + " -> ".join(cycle))
        self.cycle = cycle


def stable_order(declared: Sequence[str], needs: Mapping[str, Sequence[str]]) -> list[str]:
    """Plan order of ``declared`` ids; unknown ``needs`` entries are ignored (reported elsewhere).

    Raises :class:`CycleError` naming one cycle when not every task can be ordered.
    """
    position = {task_id: index for index, task_id in enumerate(declared)}
    indegree = [0] * len(declared)
    dependents: list[list[int]] = [[] for _ in declared]
    for index, task_id in enumerate(declared):
        for need in set(needs.get(task_id, ())):
            need_index = position.get(need)
            if need_index is not None:
                indegree[index] += 1
                dependents[need_index].append(index)
    ready = [index for index, count in enumerate(indegree) if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(declared[index])
        for dependent in dependents[index]:
            indegree[dependent] -= 1
            if indegree[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) != len(declared):
        remaining = [task_id for task_id, count in zip(declared, indegree, strict=True) if count]
        raise CycleError(find_cycle(remaining, needs))
    return order


def find_cycle(candidates: Sequence[str], needs: Mapping[str, Sequence[str]]) -> list[str]:
    """One cycle among ``candidates`` following ``needs`` edges, as ``[a, b, …, a]``.

    Iterative depth-first search (no recursion limit on long chains), starting from the
    earliest candidate so the report is deterministic.
    """
    members = set(candidates)
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for start in candidates:
        if start in state:
            continue
        path: list[str] = [start]
        iterators = [iter(sorted(set(needs.get(start, ())) & members))]
        state[start] = 1
        while path:
            advanced = False
            for nxt in iterators[-1]:
                if state.get(nxt) == 1:
                    return path[path.index(nxt) :] + [nxt]
                if nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    iterators.append(iter(sorted(set(needs.get(nxt, ())) & members)))
                    advanced = True
                    break
            if not advanced:
                state[path.pop()] = 2
                iterators.pop()
    # Kahn leaves only nodes that sit on or behind a cycle, so a cycle always exists there.
    return list(candidates[:1]) * 2


def ancestor_masks(order: Sequence[str], needs: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Per task, a bit set (Python int) of its transitive dependencies, bit = plan position.

    Walking the plan order guarantees every dependency's mask is complete before use, so
    "is there a path between x and y" becomes one bit test.
    """
    bit = {task_id: 1 << index for index, task_id in enumerate(order)}
    masks: dict[str, int] = {}
    for task_id in order:
        mask = 0
        for need in needs.get(task_id, ()):
            if need in masks:
                mask |= masks[need] | bit[need]
        masks[task_id] = mask
    return masks
