"""Types shared by the host, workers and plugins. No behaviour and no MOSAIC imports here:
hook specs, plugins and workers import their types from this module, never from the code
that patches processes or supervises runs (so no import cycle can form through a type).

Descriptors a plugin or worker returns are frozen dataclasses validated on construction,
so a wrong value is reported where it is made, naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EVENT = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class ExtrasKey:
    """An ``extras`` key (or, with ``prefix=True``, every key starting with ``name``) that a
    plugin or worker consumes itself. Keys nobody owns are the worker's to use (the CleanRL
    worker turns them into script flags). ``help`` is shown by ``mosaic plugins --extras``.
    ``switches_envs``: the key asks for env switches during the run (a curriculum), so a worker
    whose capabilities say ``supports_env_switching=False`` refuses a run that gives it.
    ``bookkeeping``: the key changes how a run is watched or recorded (tracking, live frames,
    metrics cadence), never what it learns, so runs that differ only in it are seeds of one group
    (:mod:`mosaic_core.runstore.groups`). ``live_frames``: the key, set to true, asks for live
    frames (FastLane's ``fastlane``), so a form that offers them sets it without naming it.
    ``group_tag``: the key's value names the group a run belongs to (an experiment): a run's
    summary keeps it (``experiment_tag``), so a listing filters by it without reading configs.
    ``names_experiment``: the key's value names the experiment a run continues (a worker's
    ``--name``, declared by the worker): a run's summary keeps it (``experiment``).
    ``run_notes``: the key's value is free text about the run, so a model card quotes it without
    naming it. ``metrics_interval``: the key's value is the seconds between a run's ``metrics``
    events, so a plugin that follows them (a sweep's pruner) asks for its cadence without naming it."""

    name: str
    help: str = ""
    prefix: bool = False
    switches_envs: bool = False
    bookkeeping: bool = False
    live_frames: bool = False
    group_tag: bool = False
    names_experiment: bool = False
    run_notes: bool = False
    metrics_interval: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not (
            _KEY.match(self.name) or (self.prefix and _KEY.match(self.name.rstrip("_")))
        ):
            raise ValueError(f"ExtrasKey.name must be an identifier, got {self.name!r}")
        flags = {name: value for name, value in vars(self).items() if name not in ("name", "help")}
        if not isinstance(self.help, str) or not all(isinstance(flag, bool) for flag in flags.values()):
            raise ValueError(f"ExtrasKey {self.name!r}: help must be a string, {', '.join(flags)} bools")

    def matches(self, key: str) -> bool:
        return key.startswith(self.name) if self.prefix else key == self.name

    def __str__(self) -> str:
        return f"{self.name}*" if self.prefix else self.name


@dataclass(frozen=True)
class ChildEvent:
    """A lifecycle event a training process may ask the host to emit
    (``mosaic_core.child.emit_event``), declared by the host, a plugin
    (``mosaic_child_events``) or the run's worker (``Worker.child_events``). An undeclared
    event is dropped with one warning per run naming it and the worker."""

    name: str
    help: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _EVENT.match(self.name):
            raise ValueError(f"ChildEvent.name must be a lower-case identifier, got {self.name!r}")


@dataclass(frozen=True)
class CodePath:
    """A config value naming code a run would execute from a path: ``field`` is where it came
    from (``"algo"``, ``"extras.cleanrl_home"``), ``path`` the value. A worker lists its own
    (``Worker.code_paths``); a daemon runs only those inside its ``--allow-scripts``."""

    field: str
    path: str

    def __post_init__(self) -> None:
        if not isinstance(self.field, str) or not self.field:
            raise ValueError(f"CodePath.field must name a config field, got {self.field!r}")
        if not isinstance(self.path, str) or not self.path or "\0" in self.path:
            raise ValueError(f"CodePath {self.field}: path must be a non-empty string, got {self.path!r}")


@dataclass(frozen=True)
class TrackingSettings:
    """Experiment tracking (W&B) asked for by the run's config, published by the plugin that
    owns the keys (``mosaic_run_settings``). A worker that honours it
    (``Worker.honoured_settings``) turns it into its own flags or calls; the plugin's training
    process side points the library at the run directory and its credentials."""

    project: str | None = None
    entity: str | None = None
    run_name: str | None = None
    mode: str | None = None  # online, offline or disabled
    notes: str | None = None
    requested_by: str | None = None  # the config field that asked for it, named in refusals (else the plugin)

    def __post_init__(self) -> None:
        for name in ("project", "entity", "run_name", "mode", "notes"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"TrackingSettings.{name} must be a string or None, got {value!r}")


_KINDS = ("str", "int", "float", "bool", "literal", "list")


@dataclass(frozen=True)
class FormOption:
    """One field a worker offers on a submit form (the dashboard's): its ``name``, ``kind``
    (str, int, float, bool, literal, list), ``default``, ``help``, ``choices`` (literal),
    ``item_kind`` (list), and how to show its type and default (``annotation``,
    ``default_text``)."""

    name: str
    kind: str = "str"
    default: Any = None
    help: str = ""
    choices: tuple[Any, ...] = ()
    item_kind: str | None = None
    annotation: str = ""
    default_text: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _KEY.match(self.name):
            raise ValueError(f"FormOption.name must be an identifier, got {self.name!r}")
        if self.kind not in _KINDS:
            raise ValueError(f"FormOption {self.name}: kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "choices", tuple(self.choices or ()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "default": self.default,
            "help": self.help,
            "choices": list(self.choices) or None,
            "item_kind": self.item_kind,
            "annotation": self.annotation or self.kind,
            "default_text": self.default_text,
        }


@dataclass(frozen=True)
class WorkerForm:
    """What a worker offers a submit form (``Worker.describe_options``): the algorithm names
    it knows (``algos``, ``algo`` the one described), its options for that algorithm, and
    where submitted values go: ``extras[extras_key][name]`` (or ``extras[name]`` when None).
    ``source`` says where the options come from (e.g. a script path)."""

    algos: tuple[str, ...] = ()
    algo: str | None = None
    options: tuple[FormOption, ...] = ()
    extras_key: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "algos", tuple(self.algos))
        object.__setattr__(self, "options", tuple(self.options))
        if not all(isinstance(o, FormOption) for o in self.options):
            raise ValueError("WorkerForm.options must hold mosaic_core.types.FormOption descriptors")


@dataclass(frozen=True)
class Launch:
    """What a worker's ``plan`` returns: how to start the run's training process.

    ``command`` runs with ``cwd`` (default: the run directory) and the host's environment
    plus ``env``; ``num_envs`` (when known) tells training-process plugins the vector-env
    width; ``summary`` is shown by ``--dry-run --emit-summary`` under ``"worker"``;
    ``started_payload`` goes into the ``run_started`` event; ``passthrough_stdio`` gives the
    training process the host's stdin/stdout (interactive programs; lifecycle events then go
    to ``events.jsonl`` only); ``requires_gpu`` lets the daemon refuse what it cannot run;
    ``notes`` are one-line remarks for the user (dry-run summary and stderr);
    ``code_paths`` name the code this launch executes from a path (e.g. a resolved script),
    which a daemon checks against its ``--allow-scripts`` like ``Worker.code_paths``."""

    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    num_envs: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    started_payload: dict[str, Any] = field(default_factory=dict)
    passthrough_stdio: bool = False
    notes: tuple[str, ...] = ()
    code_paths: tuple[CodePath, ...] = ()

    def __post_init__(self) -> None:
        command = tuple(self.command) if isinstance(self.command, (list, tuple)) else None
        if not command or not all(isinstance(a, str) and "\0" not in a for a in command):
            raise ValueError(f"Launch.command must be a non-empty list of strings, got {self.command!r}")
        object.__setattr__(self, "command", command)
        if not isinstance(self.env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.env.items()
        ):
            raise ValueError("Launch.env must map strings to strings")
        if self.num_envs is not None and (
            isinstance(self.num_envs, bool) or not isinstance(self.num_envs, int) or self.num_envs < 1
        ):
            raise ValueError(f"Launch.num_envs must be a positive integer or None, got {self.num_envs!r}")
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "code_paths", tuple(self.code_paths))
        if not all(isinstance(p, CodePath) for p in self.code_paths):
            raise ValueError("Launch.code_paths must hold mosaic_core.types.CodePath descriptors")


@dataclass(frozen=True)
class FrameInfo:
    """What is known about the moment a frame was rendered. ``last_reward`` is the env's (for
    a multi-agent env: the team's) last reward; ``agent_rewards`` holds each agent's, keyed by
    agent id, when the env has agents."""

    global_step: int
    env_index: int
    last_reward: float
    rolling_return: float | None
    step_rate_hz: float
    episode_count: int
    agent_rewards: dict[str, float] | None = None


@dataclass
class ChildContext:
    """What training-process hooks receive about the run they are part of. ``channel`` is
    the side channel to the host (:class:`mosaic_core.channel.ChannelSender`)."""

    run_id: str
    run_dir: Path
    extras: dict[str, Any]
    channel: Any = field(repr=False)
    algo: str = ""
    env_id: str = ""
    num_envs: int | None = None
    worker: str = ""
    plugins: list[list[str]] | None = None  # [name, module, distribution, version] the host selected
    host_pid: int = 0  # the supervising host: the training process stops itself if it dies
    # True while the program makes envs to evaluate a policy, not to train it
    # (:func:`mosaic_core.child.evaluation_envs`): plugins that count or steer training's envs
    # (curriculum) leave those alone; frame consumers may still show them.
    evaluating: bool = False

    def publish(self, kind: str, payload: dict[str, Any], reliable: bool = False) -> bool:
        """Send a message to the host (see :mod:`mosaic_core.channel`)."""
        sent: bool = self.channel.send(kind, payload, reliable=reliable)
        return sent

    def describe(self) -> str:
        """The JSON a host puts in ``MOSAIC_CHILD`` (read back by :mod:`mosaic_core.childenv`)."""
        return json.dumps(
            {
                "run_id": self.run_id,
                "run_dir": str(self.run_dir),
                "extras": self.extras,
                "channel": self.channel.address,
                "algo": self.algo,
                "env_id": self.env_id,
                "num_envs": self.num_envs,
                "worker": self.worker,
                "plugins": self.plugins,
                "host_pid": self.host_pid,
            }
        )


class EnvSwitch:
    """The run's env switches (a curriculum's stages), for a training program whose envs bypass
    ``gym.make`` (EnvPool, an env runner of its own): a plugin returns one from
    ``mosaic_env_switch``; the program gets it from :func:`mosaic_core.child.env_switch`.

        switch = child.env_switch()            # None outside a MOSAIC run, or with nothing to switch
        envs = make(switch.env_id(switch.stage()) if switch else env_id)
        ...                                    # after each rollout:
        switch.report(stage, steps=n, returns=[...])  # switch.stage() != stage -> make the new stage's envs
    """

    def stage(self) -> int:
        """The stage the host has chosen (0 until the first switch)."""
        raise NotImplementedError

    def env_id(self, stage: int) -> str:
        """The env id of ``stage``."""
        raise NotImplementedError

    def report(self, stage: int, *, steps: int, returns: list[float], episodes: int | None = None) -> bool:
        """Steps played and finished episodes' returns on ``stage`` since the last report (the host
        decides the switches from them); False when the report could not be sent."""
        raise NotImplementedError

    def close(self) -> None:
        return None


class RunRelay:
    """A plugin's live data of a run that a launcher executes elsewhere (a node of a cluster),
    relayed to the caller's machine; a plugin returns one from ``mosaic_run_relay`` on each side.

    On the node: :meth:`node_env` before the run starts (variables for its ``mosaic run``),
    :meth:`collect` while it runs, :meth:`close` at the end. On the caller: :meth:`mark` (what it
    has; None: ask nothing now) at most :attr:`rate_hz` times a second, :meth:`deliver` with what the
    node's :meth:`collect` returned for that mark, :meth:`close` at the end (before
    ``mosaic_run_finished``). Marks and items travel between machines: plain data and bytes."""

    rate_hz: float = 1.0

    def node_env(self) -> dict[str, str]:
        return {}

    def collect(self, mark: Any) -> list[Any]:
        return []

    def mark(self) -> Any:
        return None

    def deliver(self, items: list[Any]) -> None:
        return None

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class HookFailure:
    """One plugin's implementation of one hook raised or returned something invalid."""

    plugin: str
    hook: str
    error: str
    where: str = "host"  # or "training process"

    def describe(self) -> str:
        return f"plugin {self.plugin!r} failed in {self.hook} ({self.where}): {self.error}"
