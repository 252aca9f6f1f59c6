"""``mosaic compare``: runs → groups (runs that differ only by seed, or ``--group-by`` fields) →
each run's one score (:mod:`mosaic_core.runstore.score`) → per env and overall, IQM, median,
mean and optimality gap with stratified bootstrap 95 % CIs and the probability of improvement
for each pair of groups (:mod:`mosaic_experiments.stats`, rliable's functions).

The overall table puts envs together, so it needs scores on one scale: each env's score is
normalised to ``score / reference`` where the reference is ``--reference ENV=VALUE`` or the
env's registered ``reward_threshold`` (positive); the optimality gap is then at 1 (and per env,
at the reference).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic_core import MosaicError, UsageError
from mosaic_core.jsontext import dumps
from mosaic_core.runstore.groups import Group, group_by_fields, group_by_seed, mixed_budgets
from mosaic_core.runstore.score import RETURN_TAG, WINDOW_NAME, Score, run_score, run_series, training_score

FEW_SEEDS = 5


@dataclass
class Scored:
    run_dir: Path
    env_id: str
    score: Score
    points: list[tuple[int, float]]  # the run's (step, value) series of the tag: every episode (runstore.score)
    ended: bool = True  # the run has ended: its series is whole (a sample-efficiency curve holds its score after it)


@dataclass
class Comparison:
    tag: str
    groups: list[Group]
    scores: dict[str, dict[str, list[Scored]]]  # group label → env → its runs' scores
    envs: list[str]
    references: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    agent: str | None = None  # a multi-agent run's agent scored instead of the team
    untrusted: list[str] = field(default_factory=list)  # imported runs compared as named, marked in the warnings

    def matrix(self, label: str, env: str) -> list[list[float]]:
        """rliable's layout: runs × tasks (one task)."""
        return [[s.score.value] for s in self.scores[label].get(env, [])]

    def overall(self, label: str) -> list[list[float]] | None:
        """runs × envs, normalised by each env's reference; None when the envs' seed counts differ
        or an env has no reference."""
        columns = [
            [s.score.value / self.references[env] for s in self.scores[label].get(env, [])]
            for env in self.envs
            if env in self.references
        ]
        if len(columns) != len(self.envs) or len({len(c) for c in columns}) != 1:
            return None
        return [list(row) for row in zip(*columns)]


@dataclass
class Resolved:
    """The runs named, and the imported runs an experiment's name would have brought in."""

    runs: list[Path]
    left_out: list[str] = field(default_factory=list)  # untrusted runs tagged with a named experiment

    def note(self) -> str | None:
        if not self.left_out:
            return None
        return (
            f"left out {len(self.left_out)} imported, untrusted run(s) tagged with the experiment "
            f"({_ids(self.left_out)}): anyone's archive can carry an experiment's name (`mosaic runs trust RUN` "
            "once you have checked one)"
        )


def resolve_runs(root: Path, refs: list[str]) -> Resolved:
    """Each argument: a run (id or unique prefix) or an experiment (its runs, by their
    ``experiment`` tag, the owner's own only: an imported, untrusted run is never one of them);
    one line naming an argument that is neither."""
    from mosaic_core.runstore.index import list_runs
    from mosaic_core.toolkit import find_run_dir

    found: dict[Path, None] = {}
    tagged: dict[str, list[Path]] | None = None
    imported: dict[str, list[str]] = {}
    left_out: list[str] = []
    for ref in refs:
        if tagged is None:
            tagged = {}
            for summary in list_runs(root):  # each run's tag and trust from the index: no run file read
                path, tag = Path(summary.path), summary.experiment_tag
                if tag and summary.untrusted:
                    imported.setdefault(tag, []).append(path.name)
                elif tag:
                    tagged.setdefault(tag, []).append(path)
        if ref in tagged:
            found.update(dict.fromkeys(sorted(tagged[ref])))
            left_out += sorted(imported.get(ref, []))
            continue
        try:
            found[find_run_dir(root, ref)] = None
        except MosaicError:
            if ref in imported:
                raise UsageError(
                    f"experiment {ref!r}: its runs under {root} are all imported and untrusted "
                    f"({_ids(sorted(imported[ref]))}); anyone's archive can carry an experiment's name: name "
                    "the runs, or `mosaic runs trust RUN` those you have checked"
                ) from None
            raise UsageError(f"{ref!r} is neither a run nor an experiment under {root}") from None
    return Resolved(list(found), left_out)


def untrusted_among(dirs: list[Path]) -> list[str]:
    """The runs of ``dirs`` that were imported and are not trusted yet."""
    from mosaic_core.runstore.trust import untrusted_run

    return [d.name for d in dirs if untrusted_run(d) is not None]


def _ids(names: list[str]) -> str:
    return ", ".join(names[:5]) + ("…" if len(names) > 5 else "")


def experiment_tag(run_dir: Path) -> str | None:
    from mosaic_core.runstore.groups import read_config

    extras = read_config(run_dir).get("extras")
    tag = extras.get("experiment") if isinstance(extras, dict) else None
    return tag if isinstance(tag, str) else None


def compare(
    dirs: list[Path],
    group_by: list[str] | None,
    tag: str = RETURN_TAG,
    references: dict[str, float] | None = None,
    agent: str | None = None,
) -> Comparison:
    """Group and score ``dirs`` (``agent``: that agent's return, ``tag`` is its series); a bad
    comparison (one line, exit 2) is refused here."""
    from mosaic_core.runstore.groups import setting
    from mosaic_core.runstore.summary import ENDED, summarize

    settings = {d: setting(d) for d in dirs}
    envs = {d: str(settings[d].get("env_id", "?")) for d in dirs}
    for name in group_by or []:
        if not any(name in s or f"extras.{name}" in s for s in settings.values()):
            known = sorted({k.removeprefix("extras.") for s in settings.values() for k in s})
            raise UsageError(f"--group-by {name}: no run has this field (they have: {', '.join(known)})")
    distinct = list(dict.fromkeys(envs.values()))
    if not group_by and len(distinct) > 1:
        raise UsageError(
            f"the runs are of {len(distinct)} envs ({', '.join(distinct)}): say what to compare "
            "across them, e.g. --group-by worker,algo"
        )
    groups = group_by_fields(dirs, group_by) if group_by else group_by_seed(dirs)
    comparison = Comparison(tag, groups, {}, distinct, agent=agent)
    missing, unscored = [], []
    for group in groups:
        by_env: dict[str, list[Scored]] = {}
        for run_dir in group.runs:
            points = run_series(run_dir, tag) or []
            score = run_score(run_dir, points, agent) if tag == RETURN_TAG or agent else training_score(points)
            if not points and (score is None or score.source != "eval"):
                missing.append(run_dir.name)
            elif score is None:
                unscored.append(run_dir.name)
            else:
                ended = summarize(run_dir, with_score=False).status in ENDED
                by_env.setdefault(envs[run_dir], []).append(Scored(run_dir, envs[run_dir], score, points, ended))
        comparison.scores[group.label] = by_env
    if missing and agent:
        raise UsageError(
            f"--agent {agent}: run(s) {', '.join(missing[:5])}{'…' if len(missing) > 5 else ''} have no return "
            f"of this agent ({tag}); `mosaic runs show RUN` names a multi-agent run's agents"
        )
    if missing and len(missing) == len(dirs):
        raise UsageError(f"metric {tag!r}: no run has it ({', '.join(missing[:5])}{'…' if len(missing) > 5 else ''})")
    if missing:
        raise UsageError(f"metric {tag!r}: run(s) {', '.join(missing[:5])} have none of it; leave them out")
    for group in groups:
        for env, scored in comparison.scores[group.label].items():
            if len(scored) < 2:
                raise UsageError(
                    f"group {group.label!r} has one run on {env} ({scored[0].run_dir.name}): a "
                    "confidence interval needs at least 2 seeds"
                )
    comparison.references = _references(distinct, references or {})
    comparison.untrusted = untrusted_among(dirs)
    _warn(comparison)
    return comparison


def _references(envs: list[str], given: dict[str, float]) -> dict[str, float]:
    """Each env's reference score: given, else gymnasium's registered ``reward_threshold`` when positive."""
    found = {env: value for env, value in given.items() if env in envs}
    for env in envs:
        if env in found:
            continue
        try:
            import gymnasium

            threshold = gymnasium.spec(env).reward_threshold
        except Exception:  # not a gymnasium id, or gymnasium is not here: no reference
            continue
        if isinstance(threshold, (int, float)) and threshold > 0:
            found[env] = float(threshold)
    return found


def _warn(comparison: Comparison) -> None:
    if comparison.untrusted:
        comparison.warnings.append(
            f"imported, untrusted run(s) {_ids(comparison.untrusted)}: their scores are what their archives "
            "say (`mosaic runs trust RUN` once you have checked one)"
        )
    budget = mixed_budgets(comparison.groups)
    if budget:
        comparison.warnings.append(budget)
    few = [
        f"{label} ({len(s)} on {env})"
        for label, by_env in comparison.scores.items()
        for env, s in by_env.items()
        if len(s) < FEW_SEEDS
    ]
    if few:
        comparison.warnings.append(f"fewer than {FEW_SEEDS} seeds: {', '.join(few)}; the 95% CIs are wide")


def sources(comparison: Comparison) -> str:
    """What the scores are, in words: ``eval 3, train 3`` and the window's name."""
    counts: dict[str, int] = {}
    for by_env in comparison.scores.values():
        for scored in by_env.values():
            for s in scored:
                counts[s.score.source] = counts.get(s.score.source, 0) + 1
    words = ", ".join(f"{source} {n}" for source, n in sorted(counts.items()))
    if comparison.agent:
        return (
            f"{words} (agent {comparison.agent}'s return; eval: its final evaluation's mean, train: its {WINDOW_NAME})"
        )
    if comparison.tag != RETURN_TAG:
        return f"{comparison.tag}, mean over the {WINDOW_NAME} ({words})"
    return f"{words} (eval: the final evaluation's mean return; train: the mean training return over the {WINDOW_NAME})"


def parse_references(values: list[str]) -> dict[str, float]:
    out = {}
    for value in values:
        env, sep, number = value.partition("=")
        try:
            out[env] = float(number)
        except ValueError:
            sep = ""
        if not sep or not env or out[env] <= 0:
            raise UsageError(f"--reference {value!r}: expected ENV=POSITIVE_NUMBER (e.g. CartPole-v1=500)")
    return out


def say(message: str) -> None:
    print(f"mosaic compare: {message}", file=sys.stderr, flush=True)


def to_json(value: Any) -> str:
    return dumps(value, indent=2, default=str)
