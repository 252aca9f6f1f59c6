"""Write real (if tiny) installed distributions into a folder for PYTHONPATH: a
``.dist-info`` with ``entry_points.txt`` plus the modules it names. What importlib.metadata
finds there is exactly what it finds for a pip-installed package."""

from __future__ import annotations

from pathlib import Path


def make_distribution(
    site: Path, name: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str], version: str = "1.0"
) -> Path:
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{ep} = {value}" for ep, value in eps.items())
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for module, source in modules.items():
        path = site / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return site
