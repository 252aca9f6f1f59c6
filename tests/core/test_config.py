import json
import os
import threading

import pytest

from mosaic_core.config import (
    MAX_CONFIG_FILE_BYTES,
    REDACTED,
    build_config,
    parse_extras_json,
    read_config_file,
    redact,
)
from mosaic_core.errors import ConfigError

BASE = {"run_id": "r1", "algo": "ppo", "env_id": "CartPole-v1", "total_timesteps": 1000}


def write(tmp_path, data, name="worker.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_flat_and_nested_forms_give_the_same_config(tmp_path):
    flat = read_config_file(write(tmp_path, BASE, "flat.json"))
    nested = read_config_file(write(tmp_path, {"metadata": {"worker": {"config": BASE}}}, "nested.json"))
    assert build_config(flat) == build_config(nested)


def test_cli_overrides_win_and_extras_merge_per_key():
    config = build_config(
        {**BASE, "extras": {"a": 1, "b": 2}}, overrides={"total_timesteps": 5, "seed": None}, extras={"b": 3, "c": 4}
    )
    assert config.total_timesteps == 5 and config.seed is None
    assert config.extras == {"a": 1, "b": 3, "c": 4}


def test_generated_run_id_is_a_ulid():
    config = build_config({k: v for k, v in BASE.items() if k != "run_id"}, generate_run_id=True)
    assert len(config.run_id) == 26 and config.run_id.isalnum()


@pytest.mark.parametrize(
    "data, field",
    [
        ({**BASE, "total_timesteps": 0}, "total_timesteps"),
        ({**BASE, "total_timesteps": "many"}, "total_timesteps"),
        ({**BASE, "total_timesteps": True}, "total_timesteps"),
        ({**BASE, "seed": 1.5}, "seed"),
        ({**BASE, "algo": ""}, "algo"),
        ({**BASE, "extras": []}, "extras"),
        ({**BASE, "run_id": "../etc"}, "run_id"),
        ({**BASE, "run_id": "a/b"}, "run_id"),
        ({**BASE, "colour": "red"}, "colour"),
        ({k: v for k, v in BASE.items() if k != "env_id"}, "env_id"),
    ],
)
def test_invalid_fields_are_named_with_the_file(data, field):
    with pytest.raises(ConfigError) as err:
        build_config(data, source="w.json")
    assert err.value.field == field and "w.json" in str(err.value) and err.value.exit_code == 2


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
        ("[1, 2]", "must be a JSON object, got list"),
        ('{"metadata": {"worker": {"config": 3}}}', "metadata.worker.config"),
    ],
)
def test_bad_files(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        read_config_file(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        read_config_file(tmp_path / "absent.json")


def test_a_pipe_of_ours_is_read_once_and_a_device_or_a_planted_fifo_is_refused(tmp_path):
    """``--config <(…)``: the shell's pipe is the user's own, read as it comes; a FIFO another user
    made could hold the reader forever, a device is no file, and a run's own config.json
    (``--from``, where others may plant one) is never a FIFO."""
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, json.dumps(BASE).encode()), os.close(write_end)))
    writer.start()
    try:
        assert read_config_file(f"/proc/self/fd/{read_end}") == BASE
    finally:
        writer.join()
        os.close(read_end)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not valid JSON"):  # no writer: an empty read at once, no wait
        read_config_file(fifo)
    with pytest.raises(ConfigError, match="refused: .*fifo.json is not a regular file"):
        read_config_file(fifo, run_file=True)
    with pytest.raises(ConfigError, match="refused: /dev/null is not a regular file"):
        read_config_file("/dev/null")
    if os.geteuid() == 0:  # a FIFO of another user's (nobody's), as one planted in /tmp
        os.chown(fifo, 65534, 65534)
        with pytest.raises(ConfigError, match="is not a regular file \\(owner nobody\\)"):
            read_config_file(fifo)
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_CONFIG_FILE_BYTES + 1)
    with pytest.raises(ConfigError, match="larger than 16 MiB"):
        read_config_file(big)


def test_extras_json_must_be_an_object():
    assert parse_extras_json('{"a": 1}') == {"a": 1}
    with pytest.raises(ConfigError, match="JSON object"):
        parse_extras_json("[1]")
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_extras_json("{")


def test_secrets_are_redacted_at_any_depth():
    data = {
        "wandb_api_key": "k",
        "nested": {"My_Token": "t", "list": [{"password": "p"}]},
        "keep": "v",
        "secret_empty": "",
    }
    out = redact(data)
    assert out["wandb_api_key"] == REDACTED and out["nested"]["My_Token"] == REDACTED
    assert out["nested"]["list"][0]["password"] == REDACTED and out["keep"] == "v"
    assert data["wandb_api_key"] == "k"  # a copy, the input is untouched
    config = build_config({**BASE, "extras": {"wandb_api_key": "k"}})
    assert config.to_dict()["extras"]["wandb_api_key"] == REDACTED
    assert config.extras["wandb_api_key"] == "k"


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{oops", "not valid JSON"),
        ("[]", "must be a JSON object"),
        (json.dumps({**BASE, "total_timesteps": -3}), "total_timesteps"),
        (json.dumps({"env_id": "CartPole-v1"}), "missing required field(s) algo"),  # an algo fills env and budget
    ],
)
def test_cli_bad_config_is_one_line_exit_2(mosaic, workdir, content, expected):
    (workdir / "w.json").write_text(content)
    result = mosaic("run", "--worker", "cleanrl", "--config", "w.json")
    assert result.returncode == 2
    assert expected in result.stderr and "w.json" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert not (workdir / "var").exists()


def test_cli_bad_extras_and_run_id(mosaic):
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--run-id",
        "../../x",
    )
    assert result.returncode == 2 and "run_id" in result.stderr and "Traceback" not in result.stderr
    result = mosaic(
        "run",
        "--worker",
        "cleanrl",
        "--algo",
        "ppo",
        "--env-id",
        "CartPole-v1",
        "--total-timesteps",
        "10",
        "--extras",
        "[1]",
    )
    assert result.returncode == 2 and "--extras must be a JSON object" in result.stderr
