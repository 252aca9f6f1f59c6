"""``human``: a person plays a seat from the dashboard's page of the match.

Why files: the match serves nothing (no port to guard, nothing left listening), and the dashboard,
which already holds the token and guards every request, relays. They meet in the match's own folder
(``<match>/human/``, the user's own, 0700), each file written atomically and read without following
a link:

- ``SEAT.turn.json`` (the match): the ``turn`` number, the ``legal`` actions and the page's
  ``buttons`` (action, label, key), the ``deadline``;
- ``SEAT.move.json`` (the page, through :func:`answer`): ``{"turn", "action"}`` for a legal action of
  that turn, or ``{"turn", "leave": true}`` when the page closes;
- ``SEAT.seen.json`` (the page, through :func:`waiting`): when a page last looked.

The person has ``--human-timeout`` seconds per move. No move in time, or the page closed (a leave not
followed within ``LEAVE_GRACE_S`` by a page looking again, as a reload does), or no page looking for
``PAGE_GONE_S`` after one did: :class:`~mosaic_arena.operators.SeatLeft`, the game is that seat's
forfeit and the match ends cancelled. An action the turn does not allow is refused on the page's side.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from mosaic_arena.games import legal_mask
from mosaic_arena.operators import OperatorError, Seat, SeatLeft

__all__ = ["HUMAN_DIR", "HumanOperator", "answer", "human_operator", "waiting"]

HUMAN_DIR = "human"
LEAVE_GRACE_S = 3.0
PAGE_GONE_S = 120.0
POLL_S = 0.1
MAX_FILE = 64 * 1024


def human_operator(argument: str, seat: Seat) -> HumanOperator:
    """The operator ``human`` for ``seat`` (only in a match: its moves go through the match's folder)."""
    if argument:
        raise OperatorError(f"operator human:{argument}: human takes no argument (--human-timeout sets its time)")
    if seat.match_dir is None:
        raise OperatorError("operator human: a person plays only in `mosaic match` (from the dashboard's page)")
    if getattr(seat.action_space, "n", None) is None:
        raise OperatorError(f"operator human: seat {seat.agent} of {seat.game} has no list of actions to choose from")
    return HumanOperator(seat)


class HumanOperator:
    """The match's side: asks the page for each move and waits for it."""

    shows_board = True  # the match publishes a frame of the board before each of its turns

    def __init__(self, seat: Seat):
        assert seat.match_dir is not None
        self.seat, self.folder = seat, seat.match_dir / HUMAN_DIR
        self.timeout_s = seat.human_timeout_s or 300.0  # mosaic match sets it (--human-timeout)
        self.turn = 0

    def reset(self, seed: int) -> None:
        pass

    def act(self, observation: Any, info: dict[str, Any]) -> Any:
        mask = legal_mask(observation, info)
        count = int(self.seat.action_space.n)
        legal = [int(a) for a in np.flatnonzero(np.asarray(mask))] if mask is not None else list(range(count))
        self.turn += 1
        deadline = time.time() + self.timeout_s
        self.folder.mkdir(mode=0o700, exist_ok=True)
        _write(self._file("turn"), {
            "seat": self.seat.agent, "game": self.seat.game, "turn": self.turn, "legal": legal,
            "buttons": buttons(self.seat.game, count), "columns": _columns(self.seat.game, count),
            "deadline": deadline,
        })  # fmt: skip
        while True:
            move = _read(self._file("move"))
            if move.get("turn") == self.turn:
                if move.get("leave") is True:
                    self._left_or_back(deadline)
                else:
                    return move.get("action")
            if time.time() > deadline:
                raise SeatLeft(f"{self.seat.agent} (human) did not move within {self.timeout_s:g} s")
            self._page_gone()
            time.sleep(POLL_S)

    def _left_or_back(self, deadline: float) -> None:
        """The page closed: a page looking again within the grace (a reload) plays on; else SeatLeft."""
        left_at = time.time()
        while time.time() < min(deadline, left_at + LEAVE_GRACE_S):
            time.sleep(POLL_S)
        if _seen_at(self._file("seen")) <= left_at:
            raise SeatLeft(f"{self.seat.agent} (human) left the page")
        self._file("move").unlink(missing_ok=True)

    def _page_gone(self) -> None:
        seen = _seen_at(self._file("seen"))
        if seen and time.time() - seen > PAGE_GONE_S:
            raise SeatLeft(f"{self.seat.agent} (human): no page has looked for {PAGE_GONE_S:g} s")

    def _file(self, what: str) -> Path:
        return self.folder / f"{self.seat.agent}.{what}.json"

    def close(self) -> None:
        self._file("turn").unlink(missing_ok=True)  # nobody is asked any more


def buttons(game: str, count: int) -> list[dict[str, Any]]:
    """The page's buttons in reading order: Tic-Tac-Toe's cells 1-9 row by row (the env numbers them
    column by column), Connect Four's columns 1-7, else each action by its number."""
    if game == "tictactoe_v3":
        return [{"action": (k % 3) * 3 + k // 3, "label": str(k + 1), "key": str(k + 1)} for k in range(9)]
    keys = [str(k + 1) if k < 9 else None for k in range(count)]
    return [{"action": k, "label": str(k + 1), "key": keys[k]} for k in range(count)]


def _columns(game: str, count: int) -> int:
    return 3 if game == "tictactoe_v3" else min(count, 9)


# ------------------------------------------------------------------ the page's side (the dashboard)
def waiting(run_dir: Path) -> dict[str, Any]:
    """The match's human seats: each seat's open turn (or None between turns) and its outcomes so
    far; marks that a page looks."""
    from mosaic_core.files import write_json_atomic

    seats = [name for name, spec in _config(run_dir).get("seats", {}).items() if spec == "human"]
    folder = run_dir / HUMAN_DIR
    found: dict[str, Any] = {}
    record = _read(run_dir / "match.json", limit=16 << 20)
    for seat in seats:
        turn = _read(folder / f"{seat}.turn.json")
        move = _read(folder / f"{seat}.move.json")
        open_turn = turn if turn.get("turn") and move.get("turn") != turn.get("turn") else None
        outcomes = ((record.get("seats") or {}).get(seat) or {}).get("outcomes") or []
        found[seat] = {"turn": open_turn, "outcomes": outcomes}
        if folder.is_dir():
            write_json_atomic(folder / f"{seat}.seen.json", {"at": time.time()})
    return {"seats": found, "status": record.get("status")}


def answer(run_dir: Path, given: Any) -> str | None:
    """The page's answer ``{"seat", "turn", "action"}`` (or ``"leave": true``) for an open turn,
    passed on to the match; the reason it is refused otherwise (an action the turn does not allow)."""
    from mosaic_core.files import write_json_atomic

    if not isinstance(given, dict) or not isinstance(given.get("seat"), str) or not isinstance(given.get("turn"), int):
        return 'expected {"seat": NAME, "turn": N, "action": A} or {"seat": NAME, "turn": N, "leave": true}'
    seat, number = given["seat"], given["turn"]
    if _config(run_dir).get("seats", {}).get(seat) != "human":
        return f"seat {seat[:40]!r} of match {run_dir.name} is not played by a human"
    folder = run_dir / HUMAN_DIR
    turn = _read(folder / f"{seat}.turn.json")
    if turn.get("turn") != number or _read(folder / f"{seat}.move.json").get("turn") == number:
        return f"turn {number} of {seat} is not open (the match moved on)"
    if given.get("leave") is True:
        write_json_atomic(folder / f"{seat}.move.json", {"turn": number, "leave": True})
        return None
    action = given.get("action")
    if isinstance(action, bool) or not isinstance(action, int) or action not in turn.get("legal", []):
        return f"action {str(action)[:20]} is not legal now (legal: {', '.join(map(str, turn.get('legal', [])))})"
    write_json_atomic(folder / f"{seat}.move.json", {"turn": number, "action": action})
    return None


def _config(run_dir: Path) -> dict[str, Any]:
    config = _read(run_dir / "config.json")
    return config if config.get("kind") == "match" and isinstance(config.get("seats"), dict) else {}


def _read(path: Path, limit: int = MAX_FILE) -> dict[str, Any]:
    """A JSON object file of the match's folder, or {} (missing, damaged, a link, too big)."""
    from mosaic_core.files import read_private_text

    try:
        data = json.loads(read_private_text(path, limit=limit))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _seen_at(path: Path) -> float:
    seen = _read(path).get("at")
    return float(seen) if isinstance(seen, (int, float)) else 0.0


def _write(path: Path, data: dict[str, Any]) -> None:
    from mosaic_core.files import write_json_atomic

    write_json_atomic(path, data)
