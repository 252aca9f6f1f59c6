"""The manual (README.md, the MkDocs site under docs/ and the pages it includes from the workers'
folders): every fenced block says its language, every shell block a user would type is either run
here (a preceding ``<!-- smoke -->``) or marked ``<!-- illustrative -->``, the smoke blocks pass, and
``mkdocs build --strict`` passes and fails on a broken link."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import BIN, HOST_VARS

ROOT = Path(__file__).parents[2]
SHELL = {"bash", "sh", "shell", "console", "zsh"}
MARKERS = {"<!-- smoke -->": "smoke", "<!-- illustrative -->": "illustrative"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
SNIPPET = re.compile(r'^--8<--\s+"([^"]+)"\s*$', re.MULTILINE)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    marker: str | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def manual_files() -> list[Path]:
    """README.md, every page under docs/, and the files those pages include as snippets."""
    pages = sorted((ROOT / "docs").rglob("*.md"))
    included = {ROOT / target for page in pages for target in SNIPPET.findall(page.read_text(encoding="utf-8"))}
    return [ROOT / "README.md", *pages, *sorted(included)]


def blocks(path: Path) -> list[Block]:
    found, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    previous = ""  # the last non-blank line before the fence
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence, language = match.groups()
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        found.append(Block(path, start + 1, language.lower(), MARKERS.get(previous), "\n".join(body)))
        previous, i = "", i + 1
    return found


ALL = [block for path in manual_files() for block in blocks(path)]
SMOKE = [block for block in ALL if block.marker == "smoke"]


def test_the_manual_has_the_pages_it_names():
    assert (ROOT / "mkdocs.yml").is_file()
    missing = [str(p.relative_to(ROOT)) for p in manual_files() if not p.is_file()]
    assert missing == [], f"pages include files that do not exist: {missing}"
    assert len(ALL) > 50 and len(SMOKE) >= 5  # the collector sees the blocks (a broken parser finds none)


def test_every_fenced_block_names_its_language():
    bare = [block.where for block in ALL if not block.language]
    assert bare == [], f"give these fences a language (bash for commands, text for output): {bare}"


def test_every_shell_block_is_run_here_or_marked_illustrative():
    unmarked = [block.where for block in ALL if block.language in SHELL and block.marker is None]
    assert unmarked == [], (
        "precede each shell block with <!-- smoke --> (this test runs it; keep it cheap) or "
        f"<!-- illustrative -->: {unmarked}"
    )
    misplaced = [block.where for block in ALL if block.marker and block.language not in SHELL]
    assert misplaced == [], f"markers belong before shell blocks: {misplaced}"


@pytest.mark.parametrize("block", SMOKE, ids=[block.where for block in SMOKE])
def test_smoke_block_runs(block: Block, tmp_path: Path):
    """The block as a user types it, in a fresh directory, with this venv's `mosaic` first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.text],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, f"{block.where} failed ({result.returncode}):\n{block.text}\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr


def _build(site: Path, out: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("material", reason="the docs extra (mkdocs-material) is not installed")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner
    return subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(out)],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy_site(dest: Path) -> Path:
    """The site's sources (mkdocs.yml, docs/, the files pages include) in ``dest``."""
    shutil.copy(ROOT / "mkdocs.yml", dest / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", dest / "docs")
    for path in manual_files():
        if path != ROOT / "README.md" and not path.is_relative_to(ROOT / "docs"):
            (dest / path.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest / path.relative_to(ROOT))
    return dest


def test_the_site_builds_strictly(tmp_path: Path):
    site = _copy_site(tmp_path)
    result = _build(site, tmp_path / "out")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "out" / "workers" / "rllib" / "index.html").is_file()


@pytest.mark.parametrize(
    "broken",
    ["[gone](no-such-page.md)", "[gone](running.md#no-such-section)", '--8<-- "plugins/no_such_worker/README.md"'],
)
def test_a_broken_link_or_include_fails_the_build(tmp_path: Path, broken: str):
    site = _copy_site(tmp_path)
    with (site / "docs" / "install.md").open("a", encoding="utf-8") as page:
        page.write(f"\n{broken}\n")
    result = _build(site, tmp_path / "out")
    assert result.returncode != 0
    assert re.search(r"no-such|no_such_worker", result.stderr), result.stderr[-4000:]


def test_the_readme_is_a_door():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    assert "make train" in readme and "make test" in readme
    for folder in sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").is_file()):
        assert f"plugins/{folder}/" in readme, f"the README's layout misses plugins/{folder}/"


def test_the_code_cites_only_documents_the_repository_has():
    """A comment's `docs/x.md` or `DESIGN.md` names a file here (a design note kept elsewhere is no
    reference a reader can follow)."""
    cited = re.compile(r"(?<![\w./-])((?:[\w-][\w.-]*/)+[\w.-]+\.md|[A-Z][A-Z_-]*\.md)\b")
    dangling = []
    for folder in ("mosaic_core", "plugins", "examples", "bench", ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".proto", ".toml", ".sh") or path.name == "run":
                for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                    dangling += [
                        f"{path.relative_to(ROOT)}:{number}: {name}"
                        for name in cited.findall(line)
                        if not (ROOT / name).exists()
                    ]
    assert dangling == []
