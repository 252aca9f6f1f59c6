"""The one reader of a run's episodes (``mosaic_core.runstore.score.episode_returns``, through the
analytics plugin's TensorBoard reader): what TensorBoard itself shows, read on from the last look
while the run writes, a resumed run's purged steps left out, a replaced run read afresh. The files
are written by torch's SummaryWriter (CleanRL's) and checked against TensorBoard's own reader."""

from __future__ import annotations

import shutil

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.tensorboard import SummaryWriter

from mosaic_core.runstore.score import episode_returns, run_score

TAG = "charts/episodic_return"


def tensorboard(folder) -> list[tuple[int, float]]:
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return [(e.step, e.value) for e in accumulator.Scalars(TAG)]


def write(writer: SummaryWriter, steps: range, level: float) -> None:
    for step in steps:
        writer.add_scalar(TAG, level + step / 100, step)
    writer.flush()


def test_the_reader_reads_on_and_shows_a_resumed_run_as_one_history(tmp_path):
    run_dir = tmp_path / "run"
    folder = run_dir / "runs" / "CartPole-v1__ppo__1__1"
    first = SummaryWriter(str(folder))
    write(first, range(100, 1001, 100), 0.0)
    assert episode_returns(run_dir) == [(s, s / 100) for s in range(100, 1001, 100)]
    write(first, range(1100, 1501, 100), 0.0)  # the same file, grown: read on
    assert [s for s, _v in episode_returns(run_dir)] == list(range(100, 1501, 100))
    first.close()

    # stopped, resumed from the checkpoint at step 800 (CleanRL's resume: the same folder, purge_step)
    second = SummaryWriter(str(folder), purge_step=801)
    write(second, range(900, 2001, 100), 50.0)
    second.close()
    resumed = episode_returns(run_dir)
    assert resumed == tensorboard(folder)  # what TensorBoard shows
    assert [s for s, _v in resumed] == list(range(100, 2001, 100))  # each step once: one history
    assert [v for s, v in resumed if s > 800] == [50 + s / 100 for s in range(900, 2001, 100)]
    assert run_score(run_dir).value == sum(50 + s / 100 for s in range(1100, 2001, 100)) / 10

    # the run replaced by another of the same name: read afresh, nothing of the old one kept
    shutil.rmtree(run_dir)
    third = SummaryWriter(str(folder))
    write(third, range(100, 301, 100), 7.0)
    third.close()
    assert episode_returns(run_dir) == [(100, 8.0), (200, 9.0), (300, 10.0)] == tensorboard(folder)


def test_a_runs_own_evaluation_runs_are_not_its_episodes(tmp_path):
    run_dir = tmp_path / "run"
    write(SummaryWriter(str(run_dir / "runs" / "train")), range(100, 301, 100), 0.0)
    evaluation = SummaryWriter(str(run_dir / "evaluations" / "eval-1" / "runs" / "x"))  # `mosaic evaluate`'s run
    write(evaluation, range(1, 4), 99.0)
    evaluation.close()
    assert episode_returns(run_dir) == [(100, 1.0), (200, 2.0), (300, 3.0)]
