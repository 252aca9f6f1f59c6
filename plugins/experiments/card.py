"""``mosaic runs card RUN|EXPERIMENT -o DIR``: a Hugging Face model card (``README.md`` with the
Hub's YAML front matter) beside the exported model (the run's newest checkpoint and its config),
the folder ``huggingface-cli upload`` takes. Nothing is uploaded.

The card's model is the run named, or for an experiment the best seed (by its score) of the group
with the best IQM. Its IQM and stratified bootstrap 95 % CI are over the seeds of its group (runs
that differ only by seed, as ``mosaic compare`` groups them), computed as ``mosaic compare`` does.

Text from runs is data: the front matter is written by PyYAML's ``safe_dump`` (every value quoted
as it needs, so a ``:``, newline or ``---`` in a run name or config value stays a value) and
Markdown's special characters are escaped in the body.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic_core import UsageError
from mosaic_core.contract import Checkpoint
from mosaic_core.runstore.score import Score

if TYPE_CHECKING:
    from mosaic_core.files import OutputFolder

CARD = "README.md"
CONFIG = "config.json"
MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#|~&])")  # values never start a line: - + . ! stay


@dataclass
class Subject:
    model: Path  # the run whose checkpoint is exported
    checkpoint: Checkpoint
    config: dict[str, Any]
    score: Score | None
    seeds: int  # runs in its group
    estimate: dict[str, Any] | None  # its group's IQM etc. (stats.Estimate each); None with one seed
    groups: dict[str, dict[str, Any]]  # every group's estimates (an experiment's card lists them)
    label: str
    sources: str  # what the scores are, in words
    left_out: str | None = None  # the imported, untrusted runs an experiment's name would have brought in


def write(root: Path, ref: str, out: Path, reps: int, seed: int) -> tuple[Path, Subject]:
    """Check everything, then make DIR (new: an existing name is refused) and write in it the
    checkpoint, ``config.json`` and ``README.md``, each file created there, never followed."""
    from mosaic_core.files import OutputFolder, check_output
    from mosaic_core.toolkit import redact

    check_output(out, "-o", new=True)  # a refusal now, before the bootstrap; the mkdir below decides
    subject = _subject(root, ref, reps, seed)
    folder = OutputFolder(out, "-o")
    try:
        _copy_checkpoint(subject.checkpoint, folder)
        folder.write(CONFIG, (json.dumps(redact(subject.config), indent=2, default=str) + "\n").encode())
        folder.write(CARD, render(subject, ref, root).encode())
    except BaseException:
        folder.discard()
        raise
    finally:
        folder.close()
    return out.absolute(), subject


def _subject(root: Path, ref: str, reps: int, seed: int) -> Subject:
    from mosaic_core.runstore.groups import read_config
    from mosaic_core.runstore.score import run_score
    from mosaic_experiments import compare, tables
    from mosaic_experiments.checkpoints import newest

    resolved = compare.resolve_runs(root, [ref])  # an experiment's runs: the owner's own only
    experiment = len(resolved.runs) > 1 or compare.experiment_tag(resolved.runs[0]) == ref
    dirs, model = _runs_of(root, ref, resolved.runs, experiment)
    if len(dirs) == 1:
        score = run_score(dirs[0])
        subject = _finish(
            dirs[0],
            newest(dirs[0]),
            read_config(dirs[0]),
            score,
            1,
            None,
            {},
            dirs[0].name,
            f"{score.source} 1" if score else "none",
        )
        subject.left_out = resolved.note()
        return subject
    envs = {str(read_config(d).get("env_id")) for d in dirs}
    comparison = compare.compare(dirs, ["experiment_group"] if experiment and len(envs) > 1 else None)
    sections = tables.estimate(comparison, reps, seed)
    groups = {
        label: estimates
        for name, section in sections.items()
        if name != tables.OVERALL
        for label, estimates in section["groups"].items()
    }
    if model is None:  # the best group by IQM, its best seed
        label = max(groups, key=lambda name: groups[name]["IQM"].point)
        best = [s for runs in comparison.scores[label].values() for s in runs]
        model = max(best, key=lambda s: s.score.value).run_dir
    label = next(g.label for g in comparison.groups if model.name in {r.name for r in g.runs})
    scored = {s.run_dir: s.score for runs in comparison.scores[label].values() for s in runs}
    subject = _finish(
        model,
        newest(model),
        read_config(model),
        scored.get(model),
        len(scored),
        groups[label],
        groups if experiment else {},
        label,
        compare.sources(comparison),
    )
    subject.left_out = resolved.note()
    return subject


def _runs_of(root: Path, ref: str, dirs: list[Path], experiment: bool) -> tuple[list[Path], Path | None]:
    """The runs a card is about, and its model when ``ref`` names a run: that run's group (the
    completed runs of the root that differ from it only by seed); an experiment's completed runs."""
    from mosaic_core.runstore.groups import group_by_seed
    from mosaic_core.runstore.summary import summarize

    if experiment:
        dirs = [d for d in dirs if summarize(d, with_score=False).status == "completed"]
        if not dirs:
            raise UsageError(f"experiment {ref!r} has no completed run yet; `mosaic experiment run` it first")
        return dirs, None
    model = dirs[0]
    _refuse_untrusted(model)
    every = [model, *_own_completed(root, model)]
    dirs = next((g.runs for g in group_by_seed(every) if model.name in {r.name for r in g.runs}), dirs)
    return dirs, next(d for d in dirs if d.name == model.name)


def _own_completed(root: Path, model: Path) -> list[Path]:
    """The root's completed runs but ``model``, imported and untrusted ones left out (a card's
    IQM is over the owner's own seeds)."""
    from mosaic_core.runstore.index import list_runs
    from mosaic_experiments.compare import untrusted_among

    completed = [Path(s.path) for s in list_runs(root) if s.status == "completed" and s.run_id != model.name]
    untrusted = set(untrusted_among(completed))
    return [d for d in completed if d.name not in untrusted]


def _refuse_untrusted(run_dir: Path) -> None:
    """A card of an imported run would copy its checkpoint out of the run, where nothing marks it
    (an RLlib checkpoint is code, and the folder is what a Hub upload takes): refused."""
    from mosaic_core.runstore.trust import refuse_untrusted

    refuse_untrusted(run_dir, f"a card of run {run_dir.name} (it copies the run's checkpoint out)")


def _finish(
    model: Path,
    checkpoint: Checkpoint | None,
    config: dict[str, Any],
    score: Score | None,
    seeds: int,
    estimate: dict[str, Any] | None,
    groups: dict[str, Any],
    label: str,
    sources: str,
) -> Subject:
    if checkpoint is None:
        raise UsageError(
            f"run {model.name} has no checkpoint to export (its worker's checkpoint layout finds none "
            f"in {model}); a card needs the model"
        )
    return Subject(model, checkpoint, config, score, seeds, estimate, groups, label, sources)


def _copy_checkpoint(checkpoint: Checkpoint, folder: OutputFolder) -> None:
    """The checkpoint as it is (a file or a folder; links inside stay links, never followed),
    each file read as a run file of ours."""
    try:
        _copy_into(checkpoint.path, folder, None)
    except OSError as exc:  # a file of the checkpoint that is not a regular file of ours
        raise UsageError(f"cannot export checkpoint {checkpoint.path}: {exc}") from None


def _copy_into(source: Path, folder: OutputFolder, into: int | None) -> None:
    from mosaic_core.files import open_private

    if source.is_symlink():
        folder.link(source.name, os.readlink(source), into)
    elif source.is_dir():
        inner = folder.subfolder(source.name, into)
        try:
            for entry in sorted(source.iterdir()):
                _copy_into(entry, folder, inner)
        finally:
            os.close(inner)
    else:
        with open_private(source) as reading, folder.create(source.name, into) as writing:
            shutil.copyfileobj(reading, writing)


def escape(text: Any) -> str:
    """``text`` safe in a Markdown body: special characters escaped, control characters and
    newlines shown as ``?`` (a value cannot start a heading, a fence or a front matter)."""
    from mosaic_core.files import printable

    return MARKDOWN_SPECIAL.sub(r"\\\1", printable(str(text)))


def _ci(estimate: Any) -> str:
    return f"{estimate.point:.2f} [{estimate.low:.2f}, {estimate.high:.2f}]"


def front_matter(subject: Subject) -> dict[str, Any]:
    """The Hub's card metadata: library, tags and the model-index (the env as the dataset)."""
    config = subject.config
    worker, algo, env = (str(config.get(k, "")) for k in ("worker", "algo", "env_id"))
    metrics = []
    if subject.estimate is not None:
        iqm = subject.estimate["IQM"]
        metrics.append(
            {
                "type": "iqm_return",
                "value": round(iqm.point, 4),
                "verified": False,
                "name": f"IQM return over {subject.seeds} seeds, 95% CI [{iqm.low:.2f}, {iqm.high:.2f}]",
            }
        )
    if subject.score is not None:
        metrics.append(
            {
                "type": "mean_reward",
                "value": round(subject.score.value, 4),
                "verified": False,
                "name": f"mean return of this seed ({subject.score.describe()})",
            }
        )
    return {
        "library_name": f"mosaic-{worker}" if worker else "mosaic",
        "tags": ["reinforcement-learning", "mosaic", *(t for t in (worker, algo, env) if t)],
        "model-index": [
            {
                "name": f"{algo}-{env}",
                "results": [
                    {
                        "task": {"type": "reinforcement-learning", "name": "reinforcement-learning"},
                        "dataset": {"type": env, "name": env},
                        "metrics": metrics,
                    }
                ],
            }
        ],
    }


def render(subject: Subject, ref: str, root: Path) -> str:
    import yaml

    config, score = subject.config, subject.score
    extras = _table(config, "extras")
    params = _table(extras, "algo_params")
    worker = str(config.get("worker", ""))
    evaluation = _evaluation(subject.model, score)
    lines = [
        "---",
        yaml.safe_dump(front_matter(subject), sort_keys=False, allow_unicode=False).rstrip(),
        "---",
        "",
        f"# {escape(config.get('algo'))} on {escape(config.get('env_id'))}",
        "",
        f"A policy trained by MOSAIC's {escape(worker)} worker ({escape(worker_version(worker))}); "
        f"run {escape(subject.model.name)}, checkpoint {escape(subject.checkpoint.path.name)} "
        f"(env step {subject.checkpoint.step}).",
        "",
        *(line for text in _notes(extras) for line in (f"Notes: {escape(text)}", "")),
        "| | |",
        "|---|---|",
        f"| library | {escape(worker)} {escape(worker_version(worker))} |",
        f"| env | {escape(config.get('env_id'))} |",
        f"| algorithm | {escape(config.get('algo'))} |",
        f"| seed of this model | {escape(config.get('seed'))} |",
        f"| seeds in its group | {subject.seeds} ({escape(subject.label)}) |",
        f"| budget | {escape(config.get('total_timesteps'))} env steps |",
        "",
        "## Evaluation",
        "",
        evaluation,
        "",
        f"Scores: {escape(subject.sources)}.",
        "",
    ]
    lines += _score_lines(subject, ref)
    lines += ["## Hyperparameters", ""]
    if params:
        lines += ["| parameter | value |", "|---|---|"]
        lines += [f"| {escape(k)} | {escape(json.dumps(v, default=str))} |" for k, v in sorted(params.items())]
    else:
        lines.append(f"The {escape(worker)} worker's defaults for {escape(config.get('algo'))}.")
    lines += [
        "",
        f"The whole config is `{CONFIG}` beside this card.",
        "",
        "## Reproduce",
        "",
        "```bash",
        reproduce(config),
        "```",
        "",
    ]
    return "\n".join(lines)


def _score_lines(subject: Subject, ref: str) -> list[str]:
    """The group's scores with their confidence intervals, and every group of the experiment."""
    lines: list[str] = []
    if subject.estimate is not None:
        lines += [
            f"IQM, median and mean over the group's {subject.seeds} seeds, each with its stratified bootstrap "
            "95% CI (rliable, as `mosaic compare` computes them):",
            "",
            "| metric | value [95% CI] |",
            "|---|---|",
        ]
        lines += [f"| {name} | {_ci(e)} |" for name, e in subject.estimate.items() if name != "runs"]
        lines.append("")
    else:
        lines += ["One seed: no confidence interval (run seeds with `mosaic experiment run` for one).", ""]
    if len(subject.groups) > 1:
        lines += [
            f"Every group of experiment {escape(ref)} (IQM [95% CI]):",
            "",
            "| group | seeds | IQM |",
            "|---|---|---|",
        ]
        lines += [f"| {escape(label)} | {g['runs']} | {_ci(g['IQM'])} |" for label, g in subject.groups.items()]
        lines.append("")
    return lines


def _evaluation(run_dir: Path, score: Score | None) -> str:
    from mosaic_core.runstore.score import final_evaluation

    evaluation = final_evaluation(run_dir)
    if score is not None and score.source == "eval" and evaluation is not None:
        protocol = _table(evaluation, "protocol")
        by = evaluation.get("evaluated_by")
        who = (
            f"The run's own evaluation of its saved model ({escape(by)})"
            if isinstance(by, str)
            else "`mosaic evaluate` of the checkpoint"
        )
        return (
            f"{who} at step {evaluation['global_step']}: "
            f"{len(evaluation['episodes'])} episodes, "
            f"{'deterministic' if protocol.get('deterministic') else 'stochastic'} actions, "
            f"{_seeds(protocol.get('first_seed'))}, normalisation frozen; mean return "
            f"{evaluation['mean']:.2f} ± {float(evaluation.get('std', 0.0)):.2f}."
        )
    if score is not None:
        return (
            f"No evaluation (no `eval.json`): the score is the mean **training** return over the final window "
            f"of the run ({escape(score.describe())}), not an evaluation of the final policy; "
            f"`mosaic evaluate {escape(run_dir.name)}` makes one."
        )
    return "No evaluation and no training return recorded."


def _seeds(first_seed: Any) -> str:
    """An evaluation's seeds in words: upstream CleanRL's own evaluation resets unseeded."""
    return "unseeded episodes" if first_seed is None else f"first seed {escape(first_seed)}"


def reproduce(config: dict[str, Any]) -> str:
    """The `mosaic run` command that trains this model again (shell-quoted; one line)."""
    import shlex

    extras = _table(config, "extras")
    kept = {k: v for k, v in extras.items() if k not in _BOOKKEEPING}
    argv = [
        "mosaic",
        "run",
        "--worker",
        str(config.get("worker", "")),
        "--algo",
        str(config.get("algo", "")),
        "--env-id",
        str(config.get("env_id", "")),
        "--total-timesteps",
        str(config.get("total_timesteps", "")),
        "--seed",
        str(config.get("seed", "")),
    ]
    if kept:
        argv += ["--extras", json.dumps(kept, sort_keys=True, default=str)]
    from mosaic_core.files import printable

    return printable(" ".join(shlex.quote(a) for a in argv))  # one line: a value cannot close the fence


def worker_version(name: str) -> str:
    """The worker's distribution and version installed here (what trains it again)."""
    from mosaic_core import MosaicError
    from mosaic_core.toolkit import find_worker

    try:
        item = find_worker(name)
    except MosaicError:
        return "not installed here"
    return f"{item.distribution} {item.version}"


_BOOKKEEPING = ("experiment", "experiment_group", "mode", "checkpoint_path", "policy_path")


def _notes(extras: dict[str, Any]) -> list[str]:
    """The run's notes: the values of the keys declared ``ExtrasKey(run_notes=True)`` (analytics' ``notes``)."""
    from mosaic_core.toolkit import plugin_host

    keys = [key.name for _plugin, key in plugin_host().extras_keys() if key.run_notes and not key.prefix]
    return [text for key in keys if isinstance(text := extras.get(key), str) and text.strip()]


def _table(mapping: Any, key: str) -> dict[str, Any]:
    """``mapping[key]`` when it is an object (a run's JSON files hold what their writers wrote), else {}."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, dict) else {}
