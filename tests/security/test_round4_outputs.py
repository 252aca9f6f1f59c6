"""Issue 47, item 2: an output path the owner names never leads a write somewhere else. Another
local user (uid 65534, ``setpriv``) works in a folder like ``/tmp`` (root's, sticky, everyone may
write) where the owner (root) sends every output a command takes: ``plot -o``, ``compare -o`` and
``--export``, ``sweep best --config``, ``enjoy`` and ``evaluate --video``, ``runs export -o``,
``runs card`` and ``experiment card -o``. Before, each of them overwrote (or wrote into) the
root-owned file or folder a link planted there pointed at. Now they all write through one writer
(``mosaic_core.files.atomic_output`` / ``OutputFolder``):

* a link planted at the name, dangling or not: one line, exit 2, the target untouched (not even
  created);
* a folder made in advance for a card, or a link to one of the owner's folders: refused, nothing
  written into it;
* a folder another user owns, or one others can write that is not sticky: refused before anything
  is read (they could swap what is in it);
* a process that plants and removes a link at the name in a loop while each command runs: every
  command either writes its own new file (a regular file of the owner's, never a link) or refuses
  in one line; the target is never written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, HOST_VARS
from tests.trainer.second_user import AS_NOBODY, needs_second_user, run_as_nobody

pytestmark = needs_second_user

# The attacker. plant: a link at each name (to the target) or a folder of theirs (mode "folder").
# race: until told to stop, a link at each name, a moment later removed again (only their own
# links: the folder is sticky), counting the links made.
ATTACKER = r"""
import os, sys, time
mode, target, stop, *names = sys.argv[1:]
if mode == "plant":
    for name in names:
        os.symlink(target, name)
elif mode == "folder":
    for name in names:
        os.mkdir(name)
        os.chmod(name, 0o777)
else:
    made, deadline = 0, time.time() + 600
    while not os.path.exists(stop) and time.time() < deadline:
        for name in names:
            try:
                os.symlink(target, name)
                made += 1
            except OSError:
                pass
        time.sleep(0.003)
        for name in names:
            try:
                if os.path.islink(name):
                    os.unlink(name)
            except OSError:
                pass
        time.sleep(0.001)
    print(made, flush=True)
"""

VICTIM_TEXT = "the owner's file: root only\n"


def attacker(mode: str, target: Path, *names: Path) -> None:
    done = run_as_nobody([sys.executable, "-I", "-c", ATTACKER, mode, str(target), "-", *map(str, names)])
    assert done.returncode == 0, done.stderr


class Racer:
    """:data:`ATTACKER` racing at ``names`` as uid 65534 until :meth:`stop`."""

    def __init__(self, target: Path, names: list[Path], stop: Path):
        self.stop_file = stop
        self.proc = subprocess.Popen(
            [*AS_NOBODY, sys.executable, "-I", "-c", ATTACKER, "race", str(target), str(stop), *map(str, names)],
            cwd="/",
            stdout=subprocess.PIPE,
            text=True,
        )

    def stop(self) -> int:
        """Links it made."""
        self.stop_file.touch()
        out, _ = self.proc.communicate(timeout=60)
        return int(out.strip())


def mosaic(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    return subprocess.run(
        [str(BIN / "mosaic"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def owner(tmp_path_factory):
    """The owner's things: a trained run with a checkpoint (r1), its copy as a second seed (r2), a
    sweep study with a best trial, and a root-only victim file and folder."""
    home = tmp_path_factory.mktemp("owner")
    home.chmod(0o755)  # the victims are root's; uid 65534 may name them, never write them
    root = home / "runs"
    trained = mosaic(
        [
            "run",
            "--worker",
            "cleanrl",
            "--algo",
            "ppo",
            "--env-id",
            "CartPole-v1",
            "--run-id",
            "r1",
            "--total-timesteps",
            "512",
            "--num-envs",
            "2",
            "--num-steps",
            "128",
            "--save-model",
            "--quiet",
            "--runs-dir",
            str(root),
        ],
        cwd=home,
    )
    assert trained.returncode == 0, trained.stderr[-3000:]
    shutil.copytree(root / "r1", root / "r2", symlinks=True)  # another seed of the same group
    config = json.loads((root / "r2" / "config.json").read_text())
    (root / "r2" / "config.json").write_text(json.dumps({**config, "seed": 2, "run_id": "r2"}))
    storage = _study(home)
    victim = home / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    victim_dir = home / "victim-dir"
    victim_dir.mkdir()
    (victim_dir / "keep.txt").write_text(VICTIM_TEXT)
    return {"home": home, "root": root, "storage": storage, "victim": victim, "victim_dir": victim_dir}


def _study(home: Path) -> str:
    """A study as `mosaic sweep run` makes it, with one completed trial (the best)."""
    optuna = pytest.importorskip("optuna", reason="the [sweep] extra (optuna) is not installed")
    from mosaic_sweep import storage as storages
    from mosaic_sweep.spec import load_spec
    from mosaic_sweep.study import open_study
    from tests.sweep.conftest import write_spec

    storage = f"sqlite:///{home / 'studies' / 'tiny.db'}"
    (home / "studies").mkdir(mode=0o700)
    spec = load_spec(write_spec(home))
    study = open_study(spec, storages.open_storage(storages.resolve(storage, "tiny")), create=True, shown_url=storage)
    distributions = {"learning_rate": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)}
    study.add_trial(optuna.trial.create_trial(params={"learning_rate": 0.001}, distributions=distributions, value=1.0))
    return storage


# Each output a user names: (label, the flag, its file name, the command for an output path).
def commands(owner) -> list[tuple[str, str, str, list[str]]]:
    runs = ["--runs-dir", str(owner["root"])]
    return [
        ("plot -o", "-o", "curves.png", ["plot", "r1", *runs, "-o"]),
        ("compare -o", "-o", "report.png", ["compare", "r1", "r2", "--reps", "200", *runs, "-o"]),
        ("compare --export", "--export", "scores.json", ["compare", "r1", "r2", "--reps", "200", *runs, "--export"]),
        (
            "sweep best --config",
            "--config",
            "best.json",
            ["sweep", "best", "tiny", "--storage", owner["storage"], "--config"],
        ),
        ("enjoy --video", "--video", "play.gif", ["enjoy", "r1", "--episodes", "1", *runs, "--video"]),
        ("evaluate --video", "--video", "play.mp4", ["evaluate", "r1", "--episodes", "1", *runs, "--video"]),
        ("runs export -o", "-o", "r1.tar.gz", ["runs", "export", "r1", *runs, "-o"]),
        ("runs card -o", "-o", "card", ["runs", "card", "r1", *runs, "-o"]),
        ("experiment card -o", "-o", "card2", ["experiment", "card", "r1", *runs, "-o"]),
    ]


@pytest.fixture
def shared() -> Path:
    """A folder like /tmp: root's, sticky, writable by everyone."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-outputs-"))
    path.chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def victims_untouched(owner, before: dict[str, tuple]) -> None:
    assert state(owner) == before
    assert owner["victim"].read_bytes() == VICTIM_TEXT.encode() and os.listdir(owner["victim_dir"]) == ["keep.txt"]
    assert not (owner["home"] / "created-by-link").exists()


def state(owner) -> dict[str, tuple]:
    return {
        str(p): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
        for p in (owner["victim"], owner["victim_dir"], owner["victim_dir"] / "keep.txt")
    }


def one_line(result, flag: str, *words: str, after_work: bool = False) -> None:
    """A refusal: exit 2, no traceback, one line naming ``flag`` (``after_work``: the last line,
    after what the command printed while it worked, e.g. an evaluation's events)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and lines and (after_work or len(lines) == 1), result.stderr[-2000:]
    assert lines[-1].startswith(f"mosaic: error: {flag} "), lines[-1]
    for word in words:
        assert word in lines[-1], lines[-1]


def test_a_link_planted_at_any_output_is_refused_and_its_target_untouched(owner, shared):
    before = state(owner)
    for label, flag, name, argv in commands(owner):
        for target in (owner["victim_dir"] if "card" in label else owner["victim"], owner["home"] / "created-by-link"):
            out = shared / name
            attacker("plant", target, out)
            result = mosaic([*argv, str(out)], cwd=owner["home"])
            one_line(result, flag, str(out), "symbolic link", "never written through a link")
            assert out.is_symlink(), label  # left as it was: neither followed nor replaced
            victims_untouched(owner, before)
            os.unlink(out)
    assert sorted(os.listdir(shared)) == []  # no temporary, no half-written file left


def test_a_card_folder_made_in_advance_is_refused(owner, shared):
    before = state(owner)
    for command in (["runs", "card"], ["experiment", "card"]):
        premade = shared / f"{command[0]}-card"
        attacker("folder", owner["victim"], premade)
        result = mosaic([*command, "r1", "--runs-dir", str(owner["root"]), "-o", str(premade)], cwd=owner["home"])
        one_line(result, "-o", str(premade), "exists already")
        assert os.listdir(premade) == [] and premade.stat().st_uid == 65534
    victims_untouched(owner, before)


def test_folders_another_user_can_change_are_refused(owner, shared):
    """Their own folder (they could replace what is in it), and root's folder that everyone may
    write without the sticky bit (anyone can rename the owner's entries in it)."""
    theirs = shared / "theirs"
    attacker("folder", owner["victim"], theirs)
    open_to_all = shared / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    for label, flag, name, argv in commands(owner):
        if label not in ("plot -o", "evaluate --video", "runs card -o", "sweep best --config"):
            continue  # one writer checks every folder: a few of its users show it
        for folder, words in ((theirs, ("belongs to nobody",)), (open_to_all, ("others can write", "not sticky"))):
            result = mosaic([*argv, str(folder / name)], cwd=owner["home"])
            one_line(result, flag, str(folder / name), *words)
    assert os.listdir(theirs) == [] and os.listdir(open_to_all) == []


def test_a_racing_user_never_gets_a_write_through_a_link(owner, shared):
    """uid 65534 plants and removes a link at the output name in a loop while each command runs:
    the command either makes its own new output or refuses in one line; never a write through."""
    before = state(owner)
    outcomes = {}
    for label, flag, name, argv in commands(owner):
        out = shared / name
        target = owner["victim_dir"] if "card" in label else owner["victim"]
        racer = Racer(target, [out], shared / f".stop-{name}")
        try:
            time.sleep(0.2)  # racing already
            result = mosaic([*argv, str(out)], cwd=owner["home"])
        finally:
            planted = racer.stop()
        assert planted > 10, label  # the link really came and went while the command ran
        victims_untouched(owner, before)
        if result.returncode == 0:
            info = os.lstat(out)
            assert info.st_uid == 0 and not out.is_symlink(), label
            assert out.is_dir() if "card" in label else out.is_file(), label
            outcomes[label] = "written"
        else:
            one_line(result, flag, str(out), after_work=True)
            assert not out.exists() or out.is_symlink(), label  # nothing of ours left
            outcomes[label] = "refused"
        if out.is_dir() and not out.is_symlink():
            shutil.rmtree(out)
        elif out.is_symlink() or out.exists():
            out.unlink()
    assert set(outcomes) == {label for label, *_ in commands(owner)}


def test_a_run_of_ours_into_our_own_folder_still_replaces_our_own_file(owner, tmp_path):
    """The writer is strict only where it must be: in a folder only we can write, an output of
    ours is replaced (atomically); a link of our own there is still refused."""
    out = tmp_path / "curves.png"
    for _attempt in range(2):
        done = mosaic(["plot", "r1", "--runs-dir", str(owner["root"]), "-o", str(out)], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert out.read_bytes().startswith(b"\x89PNG")
    assert sorted(os.listdir(tmp_path)) == ["curves.png"]
    out.unlink()
    out.symlink_to(owner["victim"])
    result = mosaic(["plot", "r1", "--runs-dir", str(owner["root"]), "-o", str(out)], cwd=tmp_path)
    one_line(result, "-o", "symbolic link")
    assert owner["victim"].read_text() == VICTIM_TEXT
