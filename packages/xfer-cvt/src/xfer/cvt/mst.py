"""Maximum spanning arborescence (Chu-Liu-Edmonds) for tree-constrained dependency decoding.

`scores[h, d]` is the score of the arc h -> d over nodes 0..n (0 = ROOT). `max_tree` returns the
head of every node (heads[0] = -1) of the highest-scoring tree, with exactly one word attached to
ROOT when `single_root` (UD and the PTB conversions have one root word): if the unconstrained
tree has several, every word is tried as the only root child and the best tree wins.

A NaN score (a model's overflow, inf - inf) is an impossible arc, as -inf is: numpy's argmax takes
NaN for the maximum, so one NaN arc was chosen over every finite one, and the tree returned scored
below the best (finite) tree. When every tree needs an impossible arc, `max_tree` returns one with
the fewest, the best by its other arcs.
"""

from __future__ import annotations

import numpy as np


def _cycle(heads: np.ndarray) -> list[int]:
    """Nodes of a cycle of the head graph (heads[0] = -1), or []."""
    n = len(heads)
    state = np.zeros(n, dtype=np.int8)  # 0 new, 1 on the current walk, 2 done
    state[0] = 2
    for start in range(1, n):
        walk = []
        node = start
        while state[node] == 0:
            state[node] = 1
            walk.append(node)
            node = heads[node]
        if state[node] == 1:
            return walk[walk.index(node) :]
        for visited in walk:
            state[visited] = 2
    return []


def _arc_scores(scores: np.ndarray) -> np.ndarray:
    """Float copy with the impossible arcs at -inf: NaN (see the module docstring; also what an
    entering gain -inf - -inf becomes), self loops and arcs into ROOT."""
    s = np.array(scores, dtype=np.float64)
    s[np.isnan(s)] = -np.inf  # impossible, not the maximum argmax takes it for
    np.fill_diagonal(s, -np.inf)
    s[:, 0] = -np.inf
    return s


def chu_liu_edmonds(scores: np.ndarray) -> np.ndarray:
    """Heads of the maximum spanning arborescence rooted at node 0 (no constraint on its children).

    Contracts one cycle at a time, then expands the contractions in reverse: a loop, not a
    recursion per cycle, which raised a bare RecursionError past ~1000 contractions (a CoNLL-U
    "sentence" of a few thousand words, a list, needs that many). Each level keeps only what its
    expansion reads (O(n), not its score matrix)."""
    s = _arc_scores(scores)
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    while True:
        heads = s.argmax(axis=0)
        heads[0] = -1
        cycle = np.array(_cycle(heads), dtype=np.int64)
        if not len(cycle):
            break
        in_cycle = np.zeros(len(s), dtype=bool)
        in_cycle[cycle] = True
        rest = np.flatnonzero(~in_cycle)  # rest[0] == 0: ROOT is never in a cycle
        kept = s[heads[cycle], cycle]
        enter = s[np.ix_(rest, cycle)] - kept[None, :]  # gain of entering the cycle at v from u
        leave = s[np.ix_(cycle, rest)]
        contracted = np.full((len(rest) + 1, len(rest) + 1), -np.inf)
        contracted[:-1, :-1] = s[np.ix_(rest, rest)]
        contracted[:-1, -1] = enter.max(axis=1)
        contracted[-1, :-1] = leave.max(axis=0)
        levels.append((heads, cycle, rest, enter.argmax(axis=1), leave.argmax(axis=0)))
        s = _arc_scores(contracted)
    result = heads
    for heads, cycle, rest, enter_best, leave_best in reversed(levels):
        sub, node = result, len(rest)
        result = heads.copy()
        below = sub[1:node]  # the contracted heads of rest[1:] (rest[0] is ROOT)
        from_cycle = below == node
        result[rest[1:]] = np.where(from_cycle, cycle[leave_best[1:]], rest[np.where(from_cycle, 0, below)])
        source = int(sub[node])
        result[cycle[enter_best[source]]] = rest[source]
    return result


_IMPOSSIBLE = -1e9
_SECOND_ROOT = -1e15


def tree_score(scores: np.ndarray, heads: np.ndarray) -> float:
    return float(sum(scores[heads[d], d] for d in range(1, len(heads))))


def max_tree(scores: np.ndarray, single_root: bool = True) -> np.ndarray:
    """Heads (heads[0] = -1) of the best tree; see the module docstring."""
    scores = np.where(np.isnan(scores), -np.inf, np.asarray(scores, dtype=np.float64))
    # Impossible arcs become very bad but finite, so that when every tree needs one, the tree with
    # the fewest, then the best other arcs, wins (at -inf, the contraction of a cycle that only
    # impossible arcs enter broke it at its first node, and the first root word tried won).
    finite = np.where(scores == -np.inf, _IMPOSSIBLE, scores)
    heads = chu_liu_edmonds(finite)
    if not single_root or int((heads[1:] == 0).sum()) <= 1:
        return heads
    # Other ROOT arcs worse still, so that a tree with one root is found even when every such tree
    # uses an impossible arc. Trying every word cost n decodings (a 300-word sentence took 7 s, one
    # of a thousand many minutes): each root word is tried in the order of an upper bound on its
    # tree's score (its ROOT arc plus every other word's best word head), and none once that bound
    # is below the best tree found. Same tree as trying all in order (ties: the first root word).
    words = finite[1:, 1:].copy()
    np.fill_diagonal(words, -np.inf)
    best_head = words.max(axis=0)  # each word's best word head (-inf for a one-word sentence)
    bound = finite[0, 1:] + (best_head.sum() - best_head)
    slack = 1e-9 * (1.0 + np.abs(finite[np.isfinite(finite)]).sum())  # summation order: rounding
    best, best_score, best_root = heads, None, 0
    for root in (1 + np.argsort(-bound, kind="stable")).tolist():
        if best_score is not None and bound[root - 1] + slack < best_score:
            break
        constrained = finite.copy()
        constrained[0, :] = _SECOND_ROOT
        constrained[0, root] = finite[0, root]
        candidate = chu_liu_edmonds(constrained)
        value = tree_score(finite, candidate)
        if best_score is None or value > best_score or (value == best_score and root < best_root):
            best, best_score, best_root = candidate, value, root
    return best
