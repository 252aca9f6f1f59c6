import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    RUN_STATUS_INIT: _ClassVar[RunStatus]
    RUN_STATUS_HSHK: _ClassVar[RunStatus]
    RUN_STATUS_RDY: _ClassVar[RunStatus]
    RUN_STATUS_EXEC: _ClassVar[RunStatus]
    RUN_STATUS_PAUSE: _ClassVar[RunStatus]
    RUN_STATUS_FAULT: _ClassVar[RunStatus]
    RUN_STATUS_TERM: _ClassVar[RunStatus]
RUN_STATUS_UNSPECIFIED: RunStatus
RUN_STATUS_INIT: RunStatus
RUN_STATUS_HSHK: RunStatus
RUN_STATUS_RDY: RunStatus
RUN_STATUS_EXEC: RunStatus
RUN_STATUS_PAUSE: RunStatus
RUN_STATUS_FAULT: RunStatus
RUN_STATUS_TERM: RunStatus

class SubmitRunRequest(_message.Message):
    __slots__ = ("run_id", "config_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    config_json: str
    def __init__(self, run_id: _Optional[str] = ..., config_json: _Optional[str] = ...) -> None: ...

class SubmitRunResponse(_message.Message):
    __slots__ = ("run_id", "digest", "dry_run", "summary_json", "notes")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_JSON_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    digest: str
    dry_run: bool
    summary_json: str
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., digest: _Optional[str] = ..., dry_run: _Optional[bool] = ..., summary_json: _Optional[str] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RemoveRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class RemoveRunResponse(_message.Message):
    __slots__ = ("freed_bytes",)
    FREED_BYTES_FIELD_NUMBER: _ClassVar[int]
    freed_bytes: int
    def __init__(self, freed_bytes: _Optional[int] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ("run_id", "worker_id", "worker_kind", "proto_version", "schema_id", "schema_version", "supports_pause", "supports_checkpoint")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_KIND_FIELD_NUMBER: _ClassVar[int]
    PROTO_VERSION_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_PAUSE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    worker_id: str
    worker_kind: str
    proto_version: str
    schema_id: str
    schema_version: int
    supports_pause: bool
    supports_checkpoint: bool
    def __init__(self, run_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., worker_kind: _Optional[str] = ..., proto_version: _Optional[str] = ..., schema_id: _Optional[str] = ..., schema_version: _Optional[int] = ..., supports_pause: _Optional[bool] = ..., supports_checkpoint: _Optional[bool] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ("accepted_version", "session_token", "report_events")
    ACCEPTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REPORT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    accepted_version: str
    session_token: str
    report_events: bool
    def __init__(self, accepted_version: _Optional[str] = ..., session_token: _Optional[str] = ..., report_events: _Optional[bool] = ...) -> None: ...

class RunEventReport(_message.Message):
    __slots__ = ("run_id", "event", "payload_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    event: str
    payload_json: str
    def __init__(self, run_id: _Optional[str] = ..., event: _Optional[str] = ..., payload_json: _Optional[str] = ...) -> None: ...

class RunEventReportResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ControlEvent(_message.Message):
    __slots__ = ("run_id", "grant_steps", "pause", "resume", "max_rate_hz")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    GRANT_STEPS_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    MAX_RATE_HZ_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    grant_steps: int
    pause: bool
    resume: bool
    max_rate_hz: int
    def __init__(self, run_id: _Optional[str] = ..., grant_steps: _Optional[int] = ..., pause: _Optional[bool] = ..., resume: _Optional[bool] = ..., max_rate_hz: _Optional[int] = ...) -> None: ...

class RunRecord(_message.Message):
    __slots__ = ("run_id", "status", "digest", "created_at", "updated_at", "last_heartbeat", "gpu_slot", "failure_reason", "gpu_slots", "seq_id", "terminal_event", "worker", "run_dir", "exit_code", "metadata_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    GPU_SLOT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_REASON_FIELD_NUMBER: _ClassVar[int]
    GPU_SLOTS_FIELD_NUMBER: _ClassVar[int]
    SEQ_ID_FIELD_NUMBER: _ClassVar[int]
    TERMINAL_EVENT_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    RUN_DIR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    status: RunStatus
    digest: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    last_heartbeat: _timestamp_pb2.Timestamp
    gpu_slot: int
    failure_reason: str
    gpu_slots: _containers.RepeatedScalarFieldContainer[int]
    seq_id: int
    terminal_event: str
    worker: str
    run_dir: str
    exit_code: int
    metadata_json: str
    def __init__(self, run_id: _Optional[str] = ..., status: _Optional[_Union[RunStatus, str]] = ..., digest: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_heartbeat: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., gpu_slot: _Optional[int] = ..., failure_reason: _Optional[str] = ..., gpu_slots: _Optional[_Iterable[int]] = ..., seq_id: _Optional[int] = ..., terminal_event: _Optional[str] = ..., worker: _Optional[str] = ..., run_dir: _Optional[str] = ..., exit_code: _Optional[int] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("status_filter",)
    STATUS_FILTER_FIELD_NUMBER: _ClassVar[int]
    status_filter: _containers.RepeatedScalarFieldContainer[RunStatus]
    def __init__(self, status_filter: _Optional[_Iterable[_Union[RunStatus, str]]] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[RunRecord]
    def __init__(self, runs: _Optional[_Iterable[_Union[RunRecord, _Mapping]]] = ...) -> None: ...

class WatchRunsRequest(_message.Message):
    __slots__ = ("status_filter", "since_seq")
    STATUS_FILTER_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    status_filter: _containers.RepeatedScalarFieldContainer[RunStatus]
    since_seq: int
    def __init__(self, status_filter: _Optional[_Iterable[_Union[RunStatus, str]]] = ..., since_seq: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthCheckRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthCheckResponse(_message.Message):
    __slots__ = ("pid", "started_at", "listen_address", "healthy", "running", "queued", "max_concurrent", "accepting")
    PID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    LISTEN_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_FIELD_NUMBER: _ClassVar[int]
    ACCEPTING_FIELD_NUMBER: _ClassVar[int]
    pid: int
    started_at: _timestamp_pb2.Timestamp
    listen_address: str
    healthy: bool
    running: int
    queued: int
    max_concurrent: int
    accepting: bool
    def __init__(self, pid: _Optional[int] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., listen_address: _Optional[str] = ..., healthy: _Optional[bool] = ..., running: _Optional[int] = ..., queued: _Optional[int] = ..., max_concurrent: _Optional[int] = ..., accepting: _Optional[bool] = ...) -> None: ...

class StreamStepsRequest(_message.Message):
    __slots__ = ("run_id", "since_seq")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    since_seq: int
    def __init__(self, run_id: _Optional[str] = ..., since_seq: _Optional[int] = ...) -> None: ...

class StreamEpisodesRequest(_message.Message):
    __slots__ = ("run_id", "since_seq")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    since_seq: int
    def __init__(self, run_id: _Optional[str] = ..., since_seq: _Optional[int] = ...) -> None: ...

class RunStep(_message.Message):
    __slots__ = ("run_id", "episode_index", "step_index", "action_json", "observation_json", "reward", "terminated", "truncated", "timestamp", "policy_label", "backend", "seq_id", "agent_id", "render_hint_json", "frame_ref", "payload_version", "render_payload_json", "episode_seed", "worker_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACTION_JSON_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_JSON_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    POLICY_LABEL_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    SEQ_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RENDER_HINT_JSON_FIELD_NUMBER: _ClassVar[int]
    FRAME_REF_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_VERSION_FIELD_NUMBER: _ClassVar[int]
    RENDER_PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    EPISODE_SEED_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    episode_index: int
    step_index: int
    action_json: str
    observation_json: str
    reward: float
    terminated: bool
    truncated: bool
    timestamp: _timestamp_pb2.Timestamp
    policy_label: str
    backend: str
    seq_id: int
    agent_id: str
    render_hint_json: str
    frame_ref: str
    payload_version: int
    render_payload_json: str
    episode_seed: int
    worker_id: str
    def __init__(self, run_id: _Optional[str] = ..., episode_index: _Optional[int] = ..., step_index: _Optional[int] = ..., action_json: _Optional[str] = ..., observation_json: _Optional[str] = ..., reward: _Optional[float] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., policy_label: _Optional[str] = ..., backend: _Optional[str] = ..., seq_id: _Optional[int] = ..., agent_id: _Optional[str] = ..., render_hint_json: _Optional[str] = ..., frame_ref: _Optional[str] = ..., payload_version: _Optional[int] = ..., render_payload_json: _Optional[str] = ..., episode_seed: _Optional[int] = ..., worker_id: _Optional[str] = ...) -> None: ...

class RunEpisode(_message.Message):
    __slots__ = ("run_id", "episode_index", "total_reward", "steps", "terminated", "truncated", "metadata_json", "timestamp", "seq_id", "agent_id", "worker_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_INDEX_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SEQ_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    episode_index: int
    total_reward: float
    steps: int
    terminated: bool
    truncated: bool
    metadata_json: str
    timestamp: _timestamp_pb2.Timestamp
    seq_id: int
    agent_id: str
    worker_id: str
    def __init__(self, run_id: _Optional[str] = ..., episode_index: _Optional[int] = ..., total_reward: _Optional[float] = ..., steps: _Optional[int] = ..., terminated: _Optional[bool] = ..., truncated: _Optional[bool] = ..., metadata_json: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., seq_id: _Optional[int] = ..., agent_id: _Optional[str] = ..., worker_id: _Optional[str] = ...) -> None: ...

class PublishTelemetryResponse(_message.Message):
    __slots__ = ("accepted", "dropped")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    dropped: int
    def __init__(self, accepted: _Optional[int] = ..., dropped: _Optional[int] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("refresh",)
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    refresh: bool
    def __init__(self, refresh: _Optional[bool] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("name", "status", "error", "distribution", "metadata_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DISTRIBUTION_FIELD_NUMBER: _ClassVar[int]
    METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    status: str
    error: str
    distribution: str
    metadata_json: str
    def __init__(self, name: _Optional[str] = ..., status: _Optional[str] = ..., error: _Optional[str] = ..., distribution: _Optional[str] = ..., metadata_json: _Optional[str] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...
