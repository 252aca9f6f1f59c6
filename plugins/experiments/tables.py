"""The numbers of a comparison (per env and overall) and how they print."""

from __future__ import annotations

from itertools import permutations
from typing import Any

from mosaic_experiments import stats
from mosaic_experiments.compare import Comparison

OVERALL = "overall"


def estimate(comparison: Comparison, reps: int, seed: int) -> dict[str, Any]:
    """``{section: {"groups": {label: {metric: Estimate, "runs": n}}, "improvement": {"X > Y": Estimate}}}``,
    a section per env, plus ``overall`` (normalised scores) when there are several envs."""
    sections: dict[str, Any] = {}
    for env in comparison.envs:
        matrices = {label: comparison.matrix(label, env) for label in comparison.scores}
        matrices = {label: m for label, m in matrices.items() if m}
        sections[env] = _section(matrices, comparison.references.get(env), reps, seed)
    if len(comparison.envs) > 1:
        overall = {label: comparison.overall(label) for label in comparison.scores}
        if all(m is not None for m in overall.values()):
            sections[OVERALL] = _section(overall, 1.0, reps, seed)
    return sections


def _section(matrices: dict[str, Any], gamma: float | None, reps: int, seed: int) -> dict[str, Any]:
    groups = {label: {**stats.aggregate(m, gamma, reps, seed), "runs": len(m)} for label, m in matrices.items()}
    pairs = {
        f"{x} > {y}": stats.improvement(matrices[x], matrices[y], reps, seed) for x, y in permutations(matrices, 2)
    }
    return {"gamma": gamma, "groups": groups, "improvement": pairs}


def _cell(e: Any) -> str:
    return f"{e.point:.2f} [{e.low:.2f}, {e.high:.2f}]"


def print_sections(sections: dict[str, Any], comparison: Comparison) -> None:
    for name, section in sections.items():
        if name == OVERALL:
            refs = ", ".join(f"{env} {value:g}" for env, value in comparison.references.items())
            print(f"\n== overall: scores / reference ({refs}) ==")
        else:
            print(f"\n== {name} ==")
        metrics = [m for m in stats.METRICS if any(m in g for g in section["groups"].values())]
        header = [
            "GROUP",
            "RUNS",
            *[
                f"{m.upper()} [95% CI]" if m != "optimality gap" else f"OPT. GAP @{section['gamma']:g} [95% CI]"
                for m in metrics
            ],
        ]
        rows = [[label, str(g["runs"]), *[_cell(g[m]) for m in metrics]] for label, g in section["groups"].items()]
        _table(header, rows)
        if section["improvement"]:
            print("probability of improvement P(X > Y) [95% CI]:")
            _table(["X > Y", "P"], [[pair, _cell(e)] for pair, e in section["improvement"].items()])


def _table(header: list[str], rows: list[list[str]]) -> None:
    from mosaic_core.files import printable

    table = [[printable(c) for c in row] for row in [header, *rows]]  # labels come from run files
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def as_json(sections: dict[str, Any]) -> dict[str, Any]:
    def plain(e: Any) -> Any:
        return {"point": e.point, "low": e.low, "high": e.high} if isinstance(e, stats.Estimate) else e

    return {
        name: {
            "gamma": s["gamma"],
            "groups": {label: {k: plain(v) for k, v in g.items()} for label, g in s["groups"].items()},
            "improvement": {pair: plain(e) for pair, e in s["improvement"].items()},
        }
        for name, s in sections.items()
    }
