"""What an env id becomes in RLlib's config, in the worker's environment.

Most ids go to RLlib as they are (its env runners call ``gymnasium.make``). Atari's (``ALE/...``,
``...NoFrameskip-v4``; the ``atari`` extra of the worker's environment) need two things RLlib does
not do for a bare id: ale_py imported in every env runner (gymnasium 1.x registers Atari's ids only
then), and RLlib's own Atari preprocessing (64x64 grayscale, max over 4 skipped frames, 4 stacked:
an observation its default CNN takes). Both happen in :func:`atari_env`, registered with Ray's env
registry under :data:`ATARI` (Ray ships the creator to each env runner)."""

from __future__ import annotations

from typing import Any

ATARI = "mosaic_atari"
ENV_ID_KEY = "mosaic_env_id"  # in the env config: the gymnasium id the creator makes


def register_env_families() -> None:
    """Atari's ids (``ALE/...``) exist in gymnasium 1.x once ale_py registers them (when installed)."""
    try:
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
    except ImportError:
        pass


def env_spec(env_id: str) -> Any:
    """gymnasium's spec of ``env_id``; ``MODULE:ID`` (gymnasium's own form: the module registers
    the id when imported, e.g. ``mosaic_arena.gym_ids:mosaic/TicTacToe-vs-random-v0``) imports
    ``MODULE`` first, as ``gymnasium.make`` does in the env runners. gymnasium's Error when unknown."""
    import importlib

    import gymnasium

    register_env_families()
    module, colon, name = env_id.rpartition(":")
    if colon:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise gymnasium.error.Error(f"{module}: {exc}") from None
    return gymnasium.spec(name if colon else env_id)


def is_atari(env_id: str) -> bool:
    import gymnasium

    try:
        entry = env_spec(env_id).entry_point
    except gymnasium.error.Error:
        return False
    return isinstance(entry, str) and entry.startswith("ale_py")


def atari_env(env_config: dict[str, Any]) -> Any:
    """An env runner's Atari env: made without frame skipping, then RLlib's Atari wrappers."""
    import gymnasium
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

    register_env_families()
    options = dict(env_config)
    env_id = options.pop(ENV_ID_KEY)
    options.setdefault("frameskip", 1)  # the wrapper skips 4 frames, keeping the brightest pixels
    return wrap_atari_for_new_api_stack(gymnasium.make(env_id, **options), dim=64, framestack=4)


def rllib_env(env_id: str) -> tuple[str, dict[str, Any]]:
    """(RLlib's ``env``, the env config it needs) for ``env_id``."""
    if not is_atari(env_id):
        return env_id, {}
    from ray.tune.registry import register_env

    register_env(ATARI, atari_env)
    return ATARI, {ENV_ID_KEY: env_id}
