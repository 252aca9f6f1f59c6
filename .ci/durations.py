"""Regenerate tests/durations.json, the seconds each test module took (each test of a module the
scheduler splits: tests/conftest.py's ``SPLIT``), from a pytest log with ``--durations=0`` (a whole lane's)::

    make test PYTEST_ARGS=--durations=0 2>&1 | tee /tmp/test.log
    python .ci/durations.py /tmp/test.log

tests/conftest.py queues the parallel lanes' work longest first by it; a module missing from it
counts as a middling one, so the table only needs refreshing when the order has drifted far."""

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(tests/\S+?\.py::.+)$")
ROOT = Path(__file__).resolve().parents[1]


def main(log: str) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.conftest import xdist_unit  # the scheduler's units

    seconds: dict[str, float] = defaultdict(float)
    for line in Path(log).read_text().splitlines():
        if found := LINE.match(line):
            seconds[xdist_unit(found[2])] += float(found[1])
    if not seconds:
        sys.exit(f"{log}: no --durations=0 lines")
    table = ROOT / "tests" / "durations.json"
    table.write_text(json.dumps({m: round(s, 1) for m, s in sorted(seconds.items())}, indent=1) + "\n")
    print(f"{table}: {len(seconds)} modules and split tests, {sum(seconds.values()):.0f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
