"""Operator kinds from every plugin's ``mosaic_operators`` (the one registration path), the seat
specs a match is given (``NAME=OPERATOR``) turned into operators, and :class:`SeatedOperators`,
which a league uses to keep a served policy's process across its matches."""

from __future__ import annotations

from typing import Any

from mosaic_arena.operators import Operator, OperatorError, OperatorInfo, Seat

__all__ = ["SeatedOperators", "operator_kinds", "parse_seat", "seat_operator"]


def operator_kinds() -> dict[str, OperatorInfo]:
    """Every registered operator kind by name; a name two plugins register is an error naming both."""
    from mosaic_core.toolkit import plugin_host

    kinds: dict[str, tuple[str, OperatorInfo]] = {}
    for plugin, provided, _error in plugin_host().provided("mosaic_operators"):
        for info in provided or []:
            if not isinstance(info, OperatorInfo):
                continue  # not a descriptor: that plugin's contribution is dropped
            provider = f"{plugin.name} ({plugin.distribution})"
            if info.name in kinds:
                both = " and by ".join(sorted((kinds[info.name][0], provider)))
                raise OperatorError(f"operator {info.name!r} is registered twice: by {both}")
            kinds[info.name] = (provider, info)
    return {name: info for name, (_plugin, info) in sorted(kinds.items())}


def parse_seat(text: str) -> tuple[str, str]:
    """``NAME=OPERATOR`` as (seat name, operator spec), or :class:`OperatorError`."""
    name, equals, spec = text.partition("=")
    if not equals or not name or not spec:
        raise OperatorError(f"--seat {text!r}: expected NAME=OPERATOR, e.g. player_1=random")
    return name, spec


def seat_operator(spec: str, seat: Seat, kinds: dict[str, OperatorInfo]) -> Operator:
    """The operator ``spec`` (``random``, ``scripted:NAME``, ``run:RUN_ID@STEP``…) built for ``seat``."""
    name, _, argument = spec.partition(":")
    info = kinds.get(name)
    if info is None:
        raise OperatorError(f"--seat {seat.agent}={spec}: unknown operator kind {name!r} (known: {', '.join(kinds)})")
    return info.factory(argument, seat)


class SeatedOperators:
    """Builds the operators of one match, or of a league's matches (``keep``): then an operator
    that says it may be reused (``reusable = True``: a served policy, greedy, whose process costs
    its worker's imports to start) is kept for the next match seating the same spec in the same
    seat of the same game, and closed by :meth:`close` at the league's end."""

    def __init__(self, keep: bool = False):
        self.keep = keep
        self.kept: dict[tuple[str, str, str], Any] = {}
        self.kinds: dict[str, OperatorInfo] | None = None

    def build(self, spec: str, seat: Seat) -> Any:
        key = (seat.game, seat.agent, spec)
        if key in self.kept:
            return self.kept[key]
        if self.kinds is None:
            self.kinds = operator_kinds()
        operator = seat_operator(spec, seat, self.kinds)
        if self.keep and getattr(operator, "reusable", False):
            self.kept[key] = operator
        return operator

    def release(self, operator: Any) -> None:
        """A match is done with ``operator``: closed unless kept."""
        if not any(operator is kept for kept in self.kept.values()):
            operator.close()

    def close(self) -> None:
        for operator in self.kept.values():
            operator.close()
        self.kept.clear()
