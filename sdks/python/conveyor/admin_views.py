"""What the admin API answers, as the SDK shows it: dataclasses with ``datetime`` instants
(UTC), ``timedelta`` durations and state names instead of wire integers. The TypeScript
SDK's shapes (src/sdk/admin.ts, cluster-views.ts, operations-views.ts, schedules.ts) in
snake_case."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Optional, Union

from .mux import ConcurrencyRule
from .task import Task, state_name
from .v1 import admin_service_pb2 as apb
from .v1 import task_pb2

__all__ = [
    "Activity", "ActivityBucket", "ClusterInfo", "ClusterMember", "ClusterStatus", "ConcurrencyLimit", "DrainResult",
    "GroupConfig", "GroupInfo", "MoveResult", "PartitionStatus", "QueueInfo", "RateLimit", "Schedule", "TaskPage",
    "TaskTypeRules", "WorkerInfo",
]

#: The task states in wire order: the keys of :attr:`QueueInfo.counts`.
STATE_NAMES = tuple(state_name(v) for v in task_pb2.TaskState.values() if v != task_pb2.TASK_STATE_UNSPECIFIED)


def _dt(ms: int) -> Optional[datetime]:
    return None if ms == 0 else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _td(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)


@dataclass(frozen=True)
class QueueInfo:
    name: str
    paused: bool
    #: Tasks per state name (``"pending"``, ``"completed"``, ...).
    counts: dict[str, int]
    #: The node that owns the queue.
    owner: str
    #: The per-key concurrency limit; None when the queue has none.
    concurrency_limit: Optional[int]


def queue_from_wire(q: apb.QueueInfo) -> QueueInfo:
    counts = {s: int(getattr(q.counts, s)) for s in STATE_NAMES}
    return QueueInfo(name=q.name, paused=q.paused, counts=counts, owner=q.owner, concurrency_limit=q.concurrency_limit or None)


@dataclass(frozen=True)
class TaskPage:
    tasks: list[Task]
    #: Pass to the next ``list_tasks`` call; None on the last page.
    next_page_token: Optional[str]


@dataclass(frozen=True)
class ConcurrencyLimit:
    queue: str
    max: int
    in_flight: int
    held: int


def concurrency_limit_from_wire(l: apb.ConcurrencyLimit) -> ConcurrencyLimit:
    return ConcurrencyLimit(queue=l.queue, max=l.max, in_flight=l.in_flight, held=l.held)


@dataclass(frozen=True)
class RateLimit:
    #: "" for the node's default.
    queue: str
    rate_per_sec: float
    burst: int


def rate_limit_from_wire(l: apb.RateLimit) -> RateLimit:
    return RateLimit(queue=l.queue, rate_per_sec=l.rate_per_sec, burst=l.burst)


@dataclass(frozen=True)
class GroupConfig:
    queue: str
    #: "" for the queue-wide default.
    group: str
    max_size: int
    max_delay: timedelta
    grace: timedelta


def group_config_from_wire(g: apb.GroupConfig) -> GroupConfig:
    return GroupConfig(queue=g.queue, group=g.group, max_size=g.max_size, max_delay=_td(g.max_delay_ms), grace=_td(g.grace_ms))


@dataclass(frozen=True)
class GroupInfo:
    queue: str
    group: str
    type: str
    #: "aggregating", "ready" or "unknown".
    state: str
    size: int
    first_member_at: Optional[datetime]
    last_member_at: Optional[datetime]
    next_fire_at: Optional[datetime]
    #: Whether a worker with a batch handler for the type has leased from the queue lately.
    worker_available: bool
    config: Optional[GroupConfig]


_GROUP_STATES = {apb.GROUP_STATE_AGGREGATING: "aggregating", apb.GROUP_STATE_READY: "ready"}


def group_from_wire(g: apb.GroupInfo) -> GroupInfo:
    return GroupInfo(
        queue=g.queue, group=g.group, type=g.type, state=_GROUP_STATES.get(g.state, "unknown"), size=g.size,
        first_member_at=_dt(g.first_member_at_ms), last_member_at=_dt(g.last_member_at_ms), next_fire_at=_dt(g.next_fire_at_ms),
        worker_available=g.worker_available, config=group_config_from_wire(g.config) if g.HasField("config") else None,
    )


@dataclass(frozen=True)
class TaskTypeRules:
    type: str
    rules: list[ConcurrencyRule]
    #: Who set them (a worker's registration or an operator).
    source: str
    updated_at: Optional[datetime]


def _rule_from_wire(r: task_pb2.ConcurrencyRule) -> ConcurrencyRule:
    strategy = task_pb2.LimitStrategy.Name(r.strategy)[len("LIMIT_STRATEGY_"):] if r.strategy in task_pb2.LimitStrategy.values() else "UNKNOWN"
    max_runs: Union[int, str] = r.max_runs_expression if r.max_runs_expression else r.max_runs
    return ConcurrencyRule(expression=r.expression, max_runs=max_runs, strategy=strategy, name=r.name)


def type_rules_from_wire(t: task_pb2.TaskTypeRules) -> TaskTypeRules:
    return TaskTypeRules(type=t.type, rules=[_rule_from_wire(r) for r in t.rules], source=t.source, updated_at=_dt(t.updated_at_ms))


@dataclass(frozen=True)
class ClusterInfo:
    node_id: str
    ring_version: int
    #: (node id, whether it is the answering node).
    members: list[tuple[str, bool]]
    active_grains: int
    active_queues: list[str]
    parked_leases: int
    started_at: Optional[datetime]


def cluster_info_from_wire(r: apb.GetClusterInfoResponse) -> ClusterInfo:
    return ClusterInfo(
        node_id=r.node_id, ring_version=r.ring_version, members=[(m.node_id, m.self) for m in r.members],
        active_grains=r.active_grains, active_queues=list(r.active_queues), parked_leases=r.parked_leases,
        started_at=_dt(r.started_at_ms),
    )


@dataclass(frozen=True)
class ClusterMember:
    node_id: str
    #: True for the node that answered.
    self: bool
    #: "joining", "active", "draining" or "unknown".
    state: str
    incarnation: str
    #: Lease time left in etcd; None when not asked (``with_leases``) or unknown.
    lease_left: Optional[timedelta]
    grpc_address: str
    http_address: str
    version: str
    partitions_owned: int
    #: An operator drained it: it serves forwarded calls but owns no partition.
    drained: bool


_MEMBER_STATES = {apb.MEMBER_STATE_JOINING: "joining", apb.MEMBER_STATE_ACTIVE: "active", apb.MEMBER_STATE_DRAINING: "draining"}


@dataclass(frozen=True)
class PartitionStatus:
    partition: int
    #: The node that claimed it ("" while nobody has).
    owner: str
    epoch: int
    #: "owned", "released" or "unclaimed".
    state: str
    owner_down: bool
    #: Where an operator pinned it ("" when not pinned).
    pinned_to: str
    standbys: list[str]
    log_last_seq: int


@dataclass(frozen=True)
class ClusterStatus:
    #: False for a single node: a ring of one, no etcd.
    clustered: bool
    cluster_name: str
    node_id: str
    #: The answering node's phase: registering, joining, active, draining, fenced or stopped.
    phase: str
    serving: bool
    fences: int
    ring_version: int
    partitions: int
    members: list[ClusterMember]
    #: Who should hold each partition (indexed by partition).
    partition_owners: list[str]
    #: Who does hold each partition, as recorded in etcd (indexed by partition).
    partition_states: list[PartitionStatus]
    drained_nodes: list[str]
    #: (endpoint, healthy) per etcd endpoint.
    etcd: list[tuple[str, bool]]
    #: Whether the partitions have a replicated changelog (cluster_nats), and whether it answered.
    changelog_enabled: bool
    changelog_healthy: bool


def cluster_status_from_wire(r: apb.GetClusterStatusResponse) -> ClusterStatus:
    members = [ClusterMember(
        node_id=m.node_id, self=m.self, state=_MEMBER_STATES.get(m.state, "unknown"), incarnation=m.incarnation,
        lease_left=None if m.lease_left_ms < 0 else _td(m.lease_left_ms), grpc_address=m.grpc_address,
        http_address=m.http_address, version=m.version, partitions_owned=m.partitions_owned, drained=m.drained,
    ) for m in r.members]
    partitions = [PartitionStatus(
        partition=p.partition, owner=p.owner, epoch=p.epoch, state=p.state, owner_down=p.owner_down, pinned_to=p.pinned_to,
        standbys=list(p.standbys), log_last_seq=p.log_last_seq,
    ) for p in r.partition_states]
    return ClusterStatus(
        clustered=r.clustered, cluster_name=r.cluster_name, node_id=r.node_id, phase=r.phase, serving=r.serving,
        fences=r.fences, ring_version=r.ring_version, partitions=r.partitions, members=members,
        partition_owners=list(r.partition_owners), partition_states=partitions, drained_nodes=list(r.drained_nodes),
        etcd=[(e.endpoint, e.healthy) for e in r.etcd], changelog_enabled=r.changelog.enabled,
        changelog_healthy=r.changelog.healthy,
    )


@dataclass(frozen=True)
class DrainResult:
    node_id: str
    #: Whether the node is drained now (False after an undo).
    drained: bool
    partitions_left: int
    #: A drain: the node holds nothing. An undo: always True.
    finished: bool
    waited: timedelta


def drain_from_wire(r: apb.DrainNodeResponse) -> DrainResult:
    return DrainResult(node_id=r.node_id, drained=r.drained, partitions_left=r.partitions_left, finished=r.finished, waited=_td(r.waited_ms))


@dataclass(frozen=True)
class MoveResult:
    partition: int
    #: Who held it when the call arrived ("" if nobody).
    from_node_id: str
    #: Who holds it at the answer ("" if nobody yet).
    held_by: str
    #: Its pin at the answer ("" after an unpin).
    pinned_to: str
    finished: bool
    waited: timedelta


def move_from_wire(r: apb.MovePartitionResponse) -> MoveResult:
    return MoveResult(partition=r.partition, from_node_id=r.from_node_id, held_by=r.held_by, pinned_to=r.pinned_to,
                      finished=r.finished, waited=_td(r.waited_ms))


@dataclass(frozen=True)
class WorkerInfo:
    worker_id: str
    #: As the worker reports it; "" when it does not say.
    host: str
    queues: list[str]
    types: list[str]
    #: Its total concurrency; None when it does not say.
    concurrency: Optional[int]
    in_flight: int
    last_seen_at: Optional[datetime]
    connected_since: Optional[datetime]
    #: A Lease call of it is parked: it is idle, waiting for work.
    polling: bool


def worker_from_wire(w: apb.WorkerInfo) -> WorkerInfo:
    return WorkerInfo(
        worker_id=w.worker_id, host=w.host, queues=list(w.queues), types=list(w.types), concurrency=w.concurrency or None,
        in_flight=w.in_flight, last_seen_at=_dt(w.last_seen_at_ms), connected_since=_dt(w.connected_since_ms), polling=w.polling,
    )


@dataclass(frozen=True)
class ActivityBucket:
    start_at: datetime
    enqueued: int
    completed: int
    #: Failed attempts that scheduled a retry.
    retried: int
    #: Dead-lettered: retries exhausted, refused, expired or archived by an operator.
    archived: int


@dataclass(frozen=True)
class Activity:
    """Per-minute counts of the last hour on the answering node, oldest first (the last
    bucket is the current, partial minute)."""

    bucket: timedelta
    buckets: list[ActivityBucket]


def activity_from_wire(r: apb.GetActivityResponse) -> Activity:
    return Activity(bucket=_td(r.bucket_ms), buckets=[ActivityBucket(
        start_at=datetime.fromtimestamp(b.start_ms / 1000, tz=timezone.utc), enqueued=b.enqueued, completed=b.completed,
        retried=b.retried, archived=b.archived,
    ) for b in r.buckets])


@dataclass(frozen=True)
class Schedule:
    """A stored schedule (periodic task)."""

    queue: str
    name: str
    type: str
    payload: bytes
    content_type: str
    metadata: dict[str, str]
    #: Set for a cron schedule.
    cron: Optional[str]
    #: The cron expression's zone; "" = UTC.
    time_zone: str
    #: Set for an interval schedule.
    every: Optional[timedelta]
    #: "latest" or "skip".
    missed_ticks: str
    skip_if_running: bool
    paused: bool
    #: The tick handled next; None when paused.
    next_tick_at: Optional[datetime]
    #: Every tick up to this one was handled (enqueued or skipped).
    last_tick_at: Optional[datetime]
    #: The last task the schedule enqueued ("" = none) and its state (None once purged).
    last_task_id: str
    last_task_state: Optional[str]
    created_at: Optional[datetime]
    updated_at: Optional[datetime]


def schedule_from_wire(s: apb.Schedule) -> Schedule:
    t = s.task
    cadence = s.WhichOneof("cadence")
    return Schedule(
        queue=t.queue, name=s.name, type=t.type, payload=t.payload, content_type=t.content_type, metadata=dict(t.metadata),
        cron=s.cron if cadence == "cron" else None, time_zone=s.time_zone,
        every=_td(s.interval_ms) if cadence == "interval_ms" else None,
        missed_ticks="skip" if s.missed_ticks == apb.MISSED_TICKS_SKIP else "latest", skip_if_running=s.skip_if_running,
        paused=s.paused, next_tick_at=_dt(s.next_tick_at_ms), last_tick_at=_dt(s.last_tick_at_ms), last_task_id=s.last_task_id,
        last_task_state=None if s.last_task_state == task_pb2.TASK_STATE_UNSPECIFIED else state_name(s.last_task_state),
        created_at=_dt(s.created_at_ms), updated_at=_dt(s.updated_at_ms),
    )
