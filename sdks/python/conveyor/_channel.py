"""Channel set-up shared by the client and the worker."""
from __future__ import annotations

import os
from typing import Optional

import grpc
import grpc.aio

DEFAULT_ADDRESS = "127.0.0.1:7233"
GRPC_MESSAGE_MAX_BYTES = 64 * 1024 * 1024

# Keepalive notices a dead node in seconds, even on an idle channel; reconnect attempts are
# capped at about a second so a restarted node is picked up quickly (as the TS SDK does).
# (grpc.min_reconnect_backoff_ms is left alone: in gRPC core it is the minimum time a
# connection attempt may take, not a backoff.)
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", GRPC_MESSAGE_MAX_BYTES),
    ("grpc.max_send_message_length", GRPC_MESSAGE_MAX_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 1_000),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.enable_retries", 0),
]


def default_address(address: Optional[str] = None) -> str:
    """`address`, else $CONVEYOR_SERVER, else 127.0.0.1:7233."""
    return address or os.environ.get("CONVEYOR_SERVER") or DEFAULT_ADDRESS


def sync_channel(address: Optional[str]) -> grpc.Channel:
    return grpc.insecure_channel(default_address(address), options=CHANNEL_OPTIONS)


def aio_channel(address: Optional[str]) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(default_address(address), options=CHANNEL_OPTIONS)


def auth_metadata(token: Optional[str]) -> Optional[tuple[tuple[str, str], ...]]:
    """The call metadata carrying `token` (else $CONVEYOR_TOKEN) as ``authorization: Bearer``,
    or None without one. Sent per call, so it works on plaintext loopback channels too (as
    the TS SDK's src/rpc/client.ts does)."""
    token = token if token is not None else os.environ.get("CONVEYOR_TOKEN")
    return (("authorization", f"Bearer {token}"),) if token else None
