"""Hook implementations of the curriculum plugin: envs switch stage by stage while training runs.

Curriculum mode is on when ``extras.curriculum_schedule`` is present (a preset name or a list
of stages; see :mod:`mosaic_curriculum.schedule`), unless ``extras.mode`` is ``policy_eval``:
an evaluation plays ``env_id`` and ignores the schedule. How one run makes one decision, although
its envs may live in several processes:

1. host, before the run: the schedule is parsed and every stage's env is built once to check
   that observation and action spaces match stage 0's (``mosaic_validate_config``, exit 2);
2. host, at start: the stage file ``<run dir>/curriculum.stage`` is created (stage 0) and a
   ``curriculum_stage`` event with ``condition: "start"`` is emitted;
3. training process and env processes: each env ``gym.make`` builds for stage 0 is wrapped in
   :class:`~mosaic_curriculum.wrapper.CurriculumEnv`, which reports steps and episode returns
   over the side channel and, at each reset, swaps its inner env when the stage word changed;
4. host: the reports are added up per stage (``mosaic_on_child_message``); when the current
   stage's condition fires, the next stage goes into the stage file and a ``curriculum_stage``
   event names the stage, its env and the clause that fired;
5. training process: ``curriculum/stage`` is written to TensorBoard at the script's step axis;
6. host, at the end: a ``curriculum`` section in ``manifest.json``; the stage file is removed.

Why not Syllabus-RL: its ``SequentialCurriculum`` does what we need (its condition syntax is
the one we accept), but ``syllabus-rl`` 0.7 requires ray, torch and pettingzoo, imports ray
and ``torch.multiprocessing`` eagerly in ``syllabus.core`` and matplotlib (not declared) in
its curriculum base, and uses scipy (not declared) in its self-play curricula. Using it means
replacing the script's vector env with its sync wrappers and running its queues next to our
side channel, which the unmodified-CleanRL-script rule forbids, and Ray alone outweighs the
whole framework. A sequential schedule needs a parser, a counter per stage and a swap at
reset: a few hundred lines here, built on the side channel the host already has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mosaic_core import ChildEvent, ConfigError, ExtrasKey, hookimpl
from mosaic_curriculum.childstate import child_state, enabled
from mosaic_curriculum.control import REPORT_KIND, CurriculumController
from mosaic_curriculum.schedule import SCHEDULE_KEY, load_schedule, parse_schedule
from mosaic_curriculum.stagefile import StageFile, stage_path

if TYPE_CHECKING:
    from mosaic_core import ChildContext, RunContext, WorkerConfig

STATE_KEY = "curriculum"


# --------------------------------------------------------------------------------------
# Host
# --------------------------------------------------------------------------------------
@hookimpl
def mosaic_hookspecs():
    from mosaic_curriculum import hookspecs

    return [hookspecs]


@hookimpl
def mosaic_curriculum_presets() -> dict[str, list[dict[str, Any]]]:
    import copy

    from mosaic_curriculum.schedule import PRESETS

    return copy.deepcopy(PRESETS)


@hookimpl
def mosaic_extras_keys() -> list[ExtrasKey]:
    return [
        ExtrasKey(SCHEDULE_KEY, "a list of stages or a preset name (doorkey, babyai_goto)", switches_envs=True),
        ExtrasKey("curriculum_", "reserved for curriculum settings", prefix=True),
    ]


@hookimpl
def mosaic_child_events() -> list[ChildEvent]:
    return [ChildEvent("curriculum_stage", "the run moved to the next stage of its schedule")]


@hookimpl
def mosaic_config_defaults(data: dict[str, Any]) -> dict[str, Any] | None:
    """With a schedule and no ``--env-id``, the run starts in the first stage's env (a schedule
    that cannot give one is reported as what it is, not as a missing env id)."""
    extras = data.get("extras")
    if not isinstance(extras, dict) or SCHEDULE_KEY not in extras:
        return None
    schedule, problems = parse_schedule(extras[SCHEDULE_KEY])
    if schedule is None and data.get("env_id") in (None, ""):
        raise ConfigError("; ".join(problems), field=f"extras.{SCHEDULE_KEY}")
    return {"env_id": schedule.stages[0].env_id} if schedule else None


@hookimpl
def mosaic_validate_config(config: WorkerConfig) -> list[str] | None:
    if not enabled(config.extras):
        return None
    schedule, problems = parse_schedule(config.extras[SCHEDULE_KEY])
    if schedule is None:
        return problems
    first = schedule.stages[0].env_id
    if config.env_id != first:
        problems.append(
            f"env_id {config.env_id!r} differs from the first stage of extras.{SCHEDULE_KEY} "
            f"({first!r}): the script starts on the first stage, so use --env-id {first}"
        )
    from mosaic_curriculum.spaces import check_stage_spaces

    return problems + check_stage_spaces(schedule)


@hookimpl
def mosaic_run_started(run: RunContext) -> None:
    if not enabled(run.config.extras):
        return
    schedule = load_schedule(run.config.extras[SCHEDULE_KEY])
    controller = CurriculumController(schedule, StageFile.create(stage_path(run.run_dir)), run.emit)
    run.state[STATE_KEY] = controller
    controller.start()


@hookimpl
def mosaic_on_child_message(run: RunContext, kind: str, payload: dict[str, Any]) -> None:
    controller = run.state.get(STATE_KEY)
    if kind == REPORT_KIND and controller is not None:
        controller.on_report(payload)


@hookimpl
def mosaic_on_heartbeat(run: RunContext) -> dict[str, Any] | None:
    controller = run.state.get(STATE_KEY)
    return {"curriculum": controller.heartbeat()} if controller is not None else None


@hookimpl
def mosaic_build_manifest(run: RunContext, status: str) -> dict[str, Any] | None:
    controller = run.state.get(STATE_KEY)
    return {"curriculum": controller.manifest()} if controller is not None else None


@hookimpl
def mosaic_run_finished(run: RunContext, status: str) -> None:
    controller = run.state.get(STATE_KEY)
    if controller is not None:
        controller.stage_file.remove()


# --------------------------------------------------------------------------------------
# Training process (and its env processes)
# --------------------------------------------------------------------------------------
@hookimpl
def mosaic_env_switch(child: ChildContext) -> Any:
    """The stages for a program whose envs bypass ``gym.make`` (``mosaic_core.child.env_switch``)."""
    if child_state(child) is None:
        return None
    from mosaic_curriculum.client import StageClient

    return StageClient.connect()


@hookimpl(tryfirst=True)  # innermost: the swap happens beneath every other wrapper
def mosaic_wrap_env(child: ChildContext, env: Any, env_id: str) -> Callable[[Any], Any] | None:
    state = child_state(child)
    if state is None or child.evaluating or env_id != state.schedule.stages[0].env_id:
        return None  # evaluation envs are not training's: the schedule does not count them
    from mosaic_curriculum.wrapper import CurriculumEnv, passed_kwargs

    def publish(payload: dict[str, Any], reliable: bool) -> bool:
        return child.publish(REPORT_KIND, payload, reliable)

    kwargs = passed_kwargs(env, env_id)
    return lambda inner: CurriculumEnv(inner, state.schedule, state.read_stage, publish, kwargs)


@hookimpl
def mosaic_on_scalar(child: ChildContext, tag: str, step: int | None, log_dir: str | None) -> None:
    if step is None or tag.startswith("curriculum/"):
        return
    state = child_state(child)
    if state is None:
        return
    if state.scalars is None:
        from mosaic_curriculum.scalars import StageScalars, curve_dir

        state.scalars = StageScalars(curve_dir(child.run_dir, log_dir), state.read_stage)
    state.scalars.observe(step)
