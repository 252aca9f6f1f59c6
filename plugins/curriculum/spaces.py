"""Environment making and space checks for schedules (imports gymnasium inside functions).

Stages must share observation and action spaces: the agent is built once, for stage 0,
and its network and action head stay the same when the env switches underneath. Spaces
are compatible when they have the same structure: same kind, Box shape and dtype (bounds
may differ), Discrete ``n`` and ``start``, MultiDiscrete ``nvec``, MultiBinary ``n``, Dict
keys and Tuple length (each member compatible). Other spaces (Text, MiniGrid's mission
space) only need to be of the same class.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from mosaic_curriculum.schedule import WHERE, Schedule

#: Env-id prefixes whose environments register when their package is imported.
ENV_PACKAGES = {"MiniGrid-": "minigrid", "BabyAI-": "minigrid", "ALE/": "ale_py"}


def base_make() -> Any:
    """``gymnasium.make`` as gymnasium defines it (MOSAIC's patch bypassed)."""
    import gymnasium

    return getattr(gymnasium.make, "__wrapped__", gymnasium.make)


def make_env(env_id: str, **kwargs: Any) -> Any:
    """Make ``env_id``; on an unknown id, import its package (e.g. ``minigrid``) and retry."""
    import gymnasium

    make = base_make()
    try:
        return make(env_id, **kwargs)
    except gymnasium.error.Error:
        package = next((p for prefix, p in ENV_PACKAGES.items() if env_id.startswith(prefix)), None)
        if package is None:
            raise
        try:
            module = importlib.import_module(package)
        except ImportError:
            raise gymnasium.error.Error(f"{env_id!r} needs the {package!r} package (pip install {package})") from None
        if hasattr(gymnasium, "register_envs"):  # gymnasium 1.x: the documented way
            gymnasium.register_envs(module)
        if package == "ale_py" and env_id not in gymnasium.registry:  # ale-py 0.10+ on gymnasium 0.29.1
            from ale_py import registration

            getattr(registration, "register_v5_envs", lambda: None)()
            getattr(registration, "register_v0_v4_envs", lambda: None)()
        return make(env_id, **kwargs)


def describe(space: Any) -> str:
    """A short name for a space: kind and structure, without bounds."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return f"Box(shape={space.shape}, dtype={space.dtype})"
    if isinstance(space, spaces.Discrete):
        return f"Discrete({space.n})" if int(space.start) == 0 else f"Discrete({space.n}, start={space.start})"
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()})"
    if isinstance(space, spaces.MultiBinary):
        return f"MultiBinary({space.n})"
    if isinstance(space, spaces.Dict):
        return f"Dict({', '.join(map(str, space.spaces))})"
    if isinstance(space, spaces.Tuple):
        return f"Tuple(length {len(space.spaces)})"
    return type(space).__name__


def mismatch(a: Any, b: Any, path: str = "") -> str | None:
    """Why ``a`` and ``b`` are not compatible (naming the sub-space), or None when they are."""
    from gymnasium import spaces

    where = f"{path}: " if path else ""
    if type(a) is not type(b):
        return f"{where}{describe(a)} vs {describe(b)}"
    if isinstance(a, spaces.Box):
        same = a.shape == b.shape and a.dtype == b.dtype
    elif isinstance(a, spaces.Discrete):
        same = int(a.n) == int(b.n) and int(a.start) == int(b.start)
    elif isinstance(a, spaces.MultiDiscrete):
        same = a.nvec.shape == b.nvec.shape and bool((a.nvec == b.nvec).all())
    elif isinstance(a, spaces.MultiBinary):
        same = tuple(a.shape) == tuple(b.shape)
    elif isinstance(a, spaces.Dict):
        if list(a.spaces) != list(b.spaces):
            return f"{where}{describe(a)} vs {describe(b)}"
        found = (mismatch(a[k], b[k], f"{path}[{k!r}]") for k in a.spaces)
        return next((m for m in found if m), None)
    elif isinstance(a, spaces.Tuple):
        if len(a.spaces) != len(b.spaces):
            return f"{where}{describe(a)} vs {describe(b)}"
        found = (mismatch(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a.spaces, b.spaces)))
        return next((m for m in found if m), None)
    else:
        same = True
    return None if same else f"{where}{describe(a)} vs {describe(b)}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def check_stage_spaces(schedule: Schedule) -> list[str]:
    """Make every stage's env once and compare its spaces with stage 0's; returns problems."""
    import gymnasium  # noqa: F401  (first, so its own warning filters cannot undo ours)

    problems: list[str] = []
    made: dict[str, tuple[Any, Any]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for stage in schedule.stages:
            if stage.env_id in made:
                continue
            try:
                env = make_env(stage.env_id)
            except Exception as exc:  # any failure to build is the user's to fix
                problems.append(f"{WHERE}[{stage.index}].env_id: cannot make {stage.env_id!r}: {_one_line(exc)}")
                continue
            made[stage.env_id] = (env.observation_space, env.action_space)
            env.close()
    first = schedule.stages[0]
    if first.env_id not in made:
        return problems
    for stage in schedule.stages[1:]:
        if stage.env_id not in made or stage.env_id == first.env_id:
            continue
        for kind, reference, other in zip(("observation", "action"), made[first.env_id], made[stage.env_id]):
            reason = mismatch(other, reference)
            if reason:
                problems.append(
                    f"{WHERE}[{stage.index}] ({stage.env_id}): {kind} space differs from stage 0 "
                    f"({first.env_id}): {reason}"
                )
    return problems
