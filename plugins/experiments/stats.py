"""The statistics of a comparison, computed by rliable (Agarwal et al., NeurIPS 2021) itself.

rliable is the field's reference implementation: its numbers are the ones papers report, so
we call its functions rather than re-deriving them. Score matrices are rliable's layout:
``runs × tasks`` (a task is an env), one matrix per group. Each group's bootstrap gets its own
bootstrap seed, so a group's CI does not depend on which other groups are
compared beside it (rliable draws from numpy's global random state whatever ``random_state`` says:
:func:`seeded` seeds it for the call and restores it). Definitions (rliable's): IQM = the 25 % trimmed mean over all runs and
tasks; median = the median over tasks of the per-task mean (with one task: the mean); mean;
optimality gap = ``gamma - mean(min(score, gamma))``; probability of improvement P(X > Y) =
the Mann-Whitney U statistic over runs, averaged over tasks; CIs: stratified bootstrap
(runs resampled within each task), percentile method.

numpy, scipy and rliable (with arch) are imported inside the functions: none of them is on the
CLI's start-up path.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mosaic_core import MosaicError

REPS = 2000  # bootstrap replications (rliable's default for profiles; its interval default is 50,000)
CURVE_REPS = 200  # per point of a sample-efficiency curve
CONFIDENCE = 0.95
SEED = 0
METRICS = ("IQM", "median", "mean", "optimality gap")


@dataclass(frozen=True)
class Estimate:
    point: float
    low: float
    high: float


def _missing(problem: object) -> MosaicError:
    return MosaicError(
        f"mosaic compare needs rliable, which is not installed ({problem}); pip install 'mosaic-rl[compare]'"
    )


def require_rliable() -> None:
    """A one-line error naming the extra unless rliable and arch (its bootstrap) are installed, before
    anything is read; imports neither (rliable's library brings arch, scipy.stats, statsmodels and
    pandas: 0.9 s, which a refused command never needs)."""
    import importlib.util

    for name in ("rliable", "arch"):
        if importlib.util.find_spec(name) is None:
            raise _missing(f"No module named {name!r}")


def rliable():
    """rliable's ``library`` and ``metrics`` modules, or a one-line error naming the extra."""
    try:
        from rliable import library, metrics
    except ImportError as exc:
        raise _missing(exc) from None
    return library, metrics


def _aggregates(gamma: float | None):
    import numpy as np

    _library, metrics = rliable()

    def func(scores: Any) -> Any:
        gap = metrics.aggregate_optimality_gap(scores, gamma) if gamma is not None else np.nan
        return np.array(
            [metrics.aggregate_iqm(scores), metrics.aggregate_median(scores), metrics.aggregate_mean(scores), gap]
        )

    return func


def aggregate(scores: Any, gamma: float | None = None, reps: int = REPS, seed: int = SEED) -> dict[str, Estimate]:
    """IQM, median, mean and optimality gap (at ``gamma``; None: not computed) of one group's
    ``runs × tasks`` matrix, each with its stratified bootstrap 95 % CI."""
    import numpy as np

    library, _metrics = rliable()
    with seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"group": np.asarray(scores, dtype=float)},
            _aggregates(gamma),
            reps=reps,
            confidence_interval_size=CONFIDENCE,
            random_state=np.random.RandomState(seed),
        )
    point, interval = points["group"], intervals["group"]
    return {
        name: Estimate(float(point[i]), float(interval[0][i]), float(interval[1][i]))
        for i, name in enumerate(METRICS)
        if not (name == "optimality gap" and gamma is None)
    }


def improvement(scores_x: Any, scores_y: Any, reps: int = REPS, seed: int = SEED) -> Estimate:
    """P(X > Y) with its stratified (independent per group) bootstrap 95 % CI."""
    import numpy as np

    library, metrics = rliable()
    pair = [np.asarray(scores_x, dtype=float), np.asarray(scores_y, dtype=float)]
    with seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"pair": pair},
            metrics.probability_of_improvement,
            reps=reps,
            confidence_interval_size=CONFIDENCE,
            random_state=np.random.RandomState(seed),
        )
    point, (low, high) = np.ravel(points["pair"])[0], (np.ravel(bound)[0] for bound in intervals["pair"])
    return Estimate(float(point), float(low), float(high))  # rliable returns 1-element arrays


def profiles(score_dict: dict[str, Any], taus: Sequence[float], reps: int = REPS, seed: int = SEED):
    """Performance profiles (the fraction of runs scoring above each ``tau``) with their CIs."""
    import numpy as np

    library, _metrics = rliable()
    with seeded(seed):
        return library.create_performance_profile(
            {k: np.asarray(v, dtype=float) for k, v in score_dict.items()}, np.asarray(taus, dtype=float), reps=reps
        )


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """rliable 1.2.0's stratified bootstraps draw their indices from numpy's *global* random state
    (``np.random.choice`` in ``update_indices``), whatever ``random_state`` says: seed it for the
    call and put it back after. Also silences arch's warning that ``random_state`` (which rliable
    passes it) is deprecated."""
    import numpy as np

    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="random_state is deprecated", category=FutureWarning)
            yield
    finally:
        np.random.set_state(saved)


def iqm_curve(values: Any, reps: int = CURVE_REPS, seed: int = SEED) -> tuple[Any, Any, Any]:
    """A sample-efficiency curve: the IQM over runs at each point of ``values`` (``runs × points``,
    one task) with its bootstrap 95 % CI band (:func:`mosaic_core.runstore.bands.iqm_band`, the
    dashboard's too): ``(iqm, low, high)``."""
    from mosaic_core.runstore.bands import iqm_band

    return iqm_band(values, reps, seed)
