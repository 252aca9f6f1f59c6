"""The worker's --grpc handshake when no trainer daemon answers: a clear error, nothing run."""

import socket


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_no_daemon_is_a_clear_error(mosaic, runs_root):
    target = f"127.0.0.1:{free_port()}"
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "1000",
        "--run-id",
        "nodaemon",
        "--grpc",
        "--grpc-target",
        target,
        timeout=120,
    )
    assert result.returncode != 0
    assert target in result.stderr and "daemon" in result.stderr.lower()
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (runs_root / "nodaemon").exists()
