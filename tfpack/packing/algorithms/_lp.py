"""The master LP of the `optimal` planner, re-solved as columns arrive.

``minimize sum(x) subject to A x >= demand, x >= 0`` over a growing set of
columns (plus zero-cost columns given once at construction)::

    master = Master(demand=[2., 1.], fixed=None)
    master.add([([0], [1]), ([0, 1], [1, 1])])  # packs [len0] and [len0, len1]
    value, x, duals = master.solve()    # 2.0, [1, 1] (or [0, 2]...), duals >= 0

Column generation re-solves this LP after every round. HiGHS keeps its basis
between solves when it is driven incrementally, so a re-solve takes tens of
simplex iterations instead of thousands. That needs the HiGHS object: the
public ``highspy`` package when it is installed, else the same class that
SciPy (>= 1.15) ships inside ``scipy.optimize``. Without either, every solve
goes through `scipy.optimize.linprog` from scratch: slower, same answers.
With HiGHS, `set_demand` changes the right-hand side and keeps the basis, so
that `_diving` re-solves on the demand fixed packs leave in a few dual
simplex iterations. A `_budget.Budget` given to `solve` becomes HiGHS's own
``time_limit``; a solve it stops raises `_budget.OutOfTime`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import scipy.sparse

from tfpack._fds import silenced
from tfpack.packing.algorithms._budget import Budget, OutOfTime


def _highs_class():
    try:
        import highspy  # noqa: PLC0415  (optional dependency)

        return highspy.Highs
    except ImportError:
        pass
    try:
        from scipy.optimize._highspy import _core  # noqa: PLC0415

        return _core._Highs
    except (ImportError, AttributeError):
        return None


_HIGHS = _highs_class()


_IPM_ROWS = 256  # first solve by interior point from this many rows on
_LARGEST_DEMAND = 26  # log2 of the most sequences of a length HiGHS is handed


class Master:
    """The restricted master LP.

    Args:
        demand: float64 ``[n]`` right-hand side (sequences of each length).
        fixed: optional sparse ``[n, m]`` zero-cost columns present throughout.
        incremental: use warm-started HiGHS when available (``None``: when
            available); ``False`` forces `scipy.optimize.linprog`.
    """

    def __init__(self, demand: np.ndarray, fixed=None, incremental: bool | None = None):
        self.demand = np.asarray(demand, dtype=np.float64)
        self.n = len(self.demand)
        # HiGHS called the packing LP unbounded from 2^29-2^30 sequences of a
        # length on (L = 7 and 63, depth none). The LP is solved for demand / scale
        # (a power of two: exact; at most 2^26 a length) and its solution scaled
        # back; duals are the same. The 6 suite cases past 2^26 plan the same.
        largest = float(np.abs(self.demand).max(initial=0.0))
        self.scale = 2.0 ** max(0, math.ceil(math.log2(largest)) - _LARGEST_DEMAND) if largest else 1.0
        self.fixed = scipy.sparse.csc_array((self.n, 0)) if fixed is None else fixed.tocsc()
        self.columns: list[np.ndarray] = []
        use = _HIGHS is not None if incremental is None else incremental and _HIGHS is not None
        self._highs = None
        self._solved = False
        self.fixed_x = np.zeros(self.fixed.shape[1])  # the zero-cost columns' values at the last solve
        if use:
            # highspy prints its banner from C++ while it is constructed, before
            # `output_flag` can be set; a planner prints nothing.
            with silenced(1):
                highs = _HIGHS()
            highs.setOptionValue("output_flag", False)
            # Added columns keep the basis primal feasible: primal simplex goes on from it.
            highs.setOptionValue("simplex_strategy", 4)
            inf = highs.getInfinity()
            highs.addRows(self.n, self.demand / self.scale, np.full(self.n, inf), 0,
                          np.zeros(self.n, dtype=np.int32), np.zeros(0, dtype=np.int32),
                          np.zeros(0))
            self._highs = highs
            self._add_to_highs(self.fixed, cost=0.0)

    @property
    def incremental(self) -> bool:
        return self._highs is not None

    def add(self, patterns: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Append columns, each ``(rows, copies)``: copies of the lengths of those rows."""
        if not patterns:
            return
        self.columns.extend(patterns)
        if self._highs is not None:
            self._add_to_highs(_sparse(patterns, self.n), cost=1.0)

    def basis(self):
        """HiGHS's current basis, for `set_basis` (HiGHS only)."""
        return self._highs.getBasis()

    def set_basis(self, basis) -> None:
        self._highs.setBasis(basis)

    def set_demand(self, demand: np.ndarray) -> None:
        """Change the right-hand side; the basis stays (HiGHS only).

        ``demand`` may have negative entries: a surplus that the zero-cost
        columns may pass on. A basis optimal for another right-hand side stays
        dual feasible, so solves go on with dual simplex from it.
        """
        self.demand = np.asarray(demand, dtype=np.float64)
        self._highs.changeRowsBounds(self.n, np.arange(self.n, dtype=np.int32), self.demand / self.scale,
                                     np.full(self.n, self._highs.getInfinity()))
        self._highs.setOptionValue("simplex_strategy", 1)

    def _add_to_highs(self, block, cost: float) -> None:
        k = block.shape[1]
        if not k:
            return
        block = scipy.sparse.csc_array(block)
        self._highs.addCols(k, np.full(k, cost), np.zeros(k),
                            np.full(k, self._highs.getInfinity()), block.nnz,
                            block.indptr[:-1].astype(np.int32),
                            block.indices.astype(np.int32), block.data.astype(np.float64))

    def solve(self, budget: Budget | None = None) -> tuple[float, np.ndarray, np.ndarray]:
        """Optimal value, ``x`` of the added columns, and the duals (>= 0).

        Raises:
            OutOfTime: ``budget`` ended before the LP was solved.
        """
        k = len(self.columns)
        limit = np.inf if budget is None else budget.left()
        if limit <= 0.0:
            raise OutOfTime
        if self._highs is not None:
            wall = np.inf if budget is None else budget.wall_left()
            # HiGHS compares `time_limit` with its run clock, which adds up over every
            # run of this object: the limit is that clock now plus the time left (a
            # master solved for 0.6 s in all stopped at once with 0.57 s left).
            self._highs.setOptionValue("time_limit",
                                       float(min(self._highs.getRunTime() + wall, 1e9)))
            # From scratch, interior point beats simplex on LPs with thousands of
            # rows (70 s -> 12 s at 8,189 lengths), and more so without presolve
            # (6.0 s -> 2.4 s: it finds little to remove), and on hundreds too
            # (0.14 s -> 0.06 s at 534 lengths); re-solves go on with simplex.
            cold = not self._solved and self.n >= _IPM_ROWS
            if cold:
                self._highs.setOptionValue("solver", "ipm")
                self._highs.setOptionValue("presolve", "off")
            self._highs.run()
            if cold:
                self._highs.setOptionValue("solver", "simplex")
                self._highs.setOptionValue("presolve", "choose")
            self._solved = True
            status = self._highs.getModelStatus()
            if status == type(status).kTimeLimit:
                self._solved = False  # the next solve starts afresh (its basis is not optimal)
                raise OutOfTime
            if status != type(status).kOptimal:  # pragma: no cover - always feasible
                raise RuntimeError(f"HiGHS failed on the packing LP: {status}")
            solution = self._highs.getSolution()
            x = np.asarray(solution.col_value)
            duals = np.asarray(solution.row_dual)
            value = float(self._highs.getInfo().objective_function_value)
            offset = self.fixed.shape[1]
            self.fixed_x = x[:offset] * self.scale
            return value * self.scale, x[offset: offset + k] * self.scale, np.maximum(duals, 0.0)
        matrix = scipy.sparse.hstack([_sparse(self.columns, self.n), self.fixed], format="csc")
        cost = np.concatenate([np.ones(k), np.zeros(self.fixed.shape[1])])
        res = scipy.optimize.linprog(cost, A_ub=-matrix, b_ub=-self.demand / self.scale, bounds=(0, None),
                                     method="highs",
                                     options={} if limit == np.inf else {"time_limit": limit})
        if res.status == 1:  # iteration or time limit
            raise OutOfTime
        if res.status != 0:  # pragma: no cover - always feasible
            raise RuntimeError(f"HiGHS failed on the packing LP: {res.message}")
        self.fixed_x = res.x[k:] * self.scale
        return (float(res.fun) * self.scale, res.x[:k] * self.scale,
                np.maximum(-res.ineqlin.marginals, 0.0))


def _sparse(patterns: list[tuple[np.ndarray, np.ndarray]], n: int) -> scipy.sparse.csc_array:
    """Columns ``(rows, copies)`` as a sparse ``[n, len(patterns)]`` matrix."""
    sizes = np.array([len(rows) for rows, _ in patterns])
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    indices = np.concatenate([rows for rows, _ in patterns])
    data = np.concatenate([copies for _, copies in patterns]).astype(np.float64)
    return scipy.sparse.csc_array((data, indices, indptr), shape=(n, len(patterns)))
