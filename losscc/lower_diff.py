"""Stage 5, continued: the ``_lower_<Type>`` methods of :class:`losscc.lower.Lowerer` for the
differences along an axis: ``diff`` (``Diff``) and its adjoint (``DiffAdjoint``, built by
the symbolic backward, losscc.backward)."""

from __future__ import annotations

from .operands import ADD
from .shapes import pos_expr


class DiffLowering:
    """Differences along an axis; the bookkeeping is :class:`losscc.lower.Lowerer`'s."""

    def _slices(self, e, *keys):
        """x's slices along e's axis, each a `start:stop` key ('1:', ':-1', ':1')."""
        x = self.tensor_arg(e.args[0])
        pos = pos_expr(e.args[1].name, self.prog, self.need)
        if pos.lstrip("-").isdigit():
            tail = ", :" * (-int(pos) - 1)
            return pos, [f"{x}[..., {s}{tail}]" for s in keys]
        # a variadic group follows the axis: the trailing slices counted at run time
        tail = f" + (slice(None),) * (-({pos}) - 1)"
        spans = {"1:": "1, None", ":-1": "None, -1", ":1": "0, 1"}
        return pos, [f"{x}[(..., slice({spans[s]})){tail}]" for s in keys]

    def _lower_Diff(self, e) -> tuple[str, int]:
        """x[k + 1] - x[k] along the axis, and a zero slice after the last (the axis keeps its size)."""
        pos, (later, before, first) = self._slices(e, "1:", ":-1", ":1")
        step = self.materialize_code(f"{later} - {before}")
        return self.call("concat", x=step, y=self.op("zeros_like", x=first), axis=pos)

    def _lower_DiffAdjoint(self, e) -> tuple[str, int]:
        """g[k - 1] - g[k] along the axis, g[-1] being 0: the transpose of diff where g's last
        entry (diff's 0) is 0 already (the rule masks it)."""
        pos, (before, first) = self._slices(e, ":-1", ":1")
        shifted = self.materialize_code(self.op("concat", x=self.op("zeros_like", x=first), y=before, axis=pos))
        return f"{shifted} - {self.tensor_arg(e.args[0])}", ADD
