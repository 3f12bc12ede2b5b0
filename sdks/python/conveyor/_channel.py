"""Channel set-up shared by the client and the worker."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional, Union

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


@dataclass(frozen=True)
class Tls:
    """TLS to the node (as the TS SDK's ``tls`` option): `ca` is the PEM of the CA(s) that
    signed the node's certificate (None: the system's roots); `cert` and `key` are this
    client's certificate and private key in PEM, for a node that requires them (mTLS,
    ``tls_client_ca``). PEM as ``bytes`` or ``str``, e.g. ``Path("ca.crt").read_bytes()``."""

    ca: Optional[Union[bytes, str]] = None
    cert: Optional[Union[bytes, str]] = None
    key: Optional[Union[bytes, str]] = None


#: What ``tls=`` accepts: None or False (plaintext), True (the system's roots) or a :class:`Tls`.
TlsOption = Union[None, bool, Tls]


def _pem(value: Optional[Union[bytes, str]], name: str) -> Optional[bytes]:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, bytes) or b"-----BEGIN" not in value:
        raise ValueError(f"tls.{name}: expected PEM text (-----BEGIN ...), as bytes or str; read the file first")
    return value


def channel_credentials(tls: TlsOption) -> Optional[grpc.ChannelCredentials]:
    """The credentials of a TLS channel, or None for plaintext; raises on a malformed `tls`.
    Clients and the worker call it when they are made (so a mistake shows there, not at the
    first call) and reuse the credentials for every channel they open."""
    if tls is None or tls is False:
        return None
    if tls is True:
        tls = Tls()
    if not isinstance(tls, Tls):
        raise TypeError(f"tls: expected True or conveyor.Tls(ca=..., cert=..., key=...), got {type(tls).__name__}")
    if (tls.cert is None) != (tls.key is None):
        raise ValueError("tls: give both cert and key (the client certificate and its private key), or neither")
    return grpc.ssl_channel_credentials(root_certificates=_pem(tls.ca, "ca"), private_key=_pem(tls.key, "key"),
                                        certificate_chain=_pem(tls.cert, "cert"))


def sync_channel(address: Optional[str], credentials: Optional[grpc.ChannelCredentials] = None) -> grpc.Channel:
    """A blocking channel: TLS with `credentials` (channel_credentials'), else plaintext."""
    if credentials is None:
        return grpc.insecure_channel(default_address(address), options=CHANNEL_OPTIONS)
    return grpc.secure_channel(default_address(address), credentials, options=CHANNEL_OPTIONS)


class _Authorization(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Adds the token's metadata to every unary call of a channel (the worker's: register,
    lease, settle, heartbeat, on the main node and on every owner it polls)."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), *self._metadata)
        return await continuation(grpc.aio.ClientCallDetails(details.method, details.timeout, metadata,
                                                             details.credentials, details.wait_for_ready), request)


def aio_channel(address: Optional[str], credentials: Optional[grpc.ChannelCredentials] = None,
                metadata: Optional[tuple[tuple[str, str], ...]] = None) -> grpc.aio.Channel:
    """A grpc.aio channel: TLS with `credentials`, else plaintext; `metadata` (auth_metadata's)
    goes with every call made on it."""
    interceptors = [_Authorization(metadata)] if metadata else None
    if credentials is None:
        return grpc.aio.insecure_channel(default_address(address), options=CHANNEL_OPTIONS, interceptors=interceptors)
    return grpc.aio.secure_channel(default_address(address), credentials, options=CHANNEL_OPTIONS, interceptors=interceptors)


def auth_metadata(token: Optional[str]) -> Optional[tuple[tuple[str, str], ...]]:
    """The call metadata carrying `token` (else $CONVEYOR_TOKEN) as ``authorization: Bearer``,
    or None without one. Sent per call, so it works on plaintext loopback channels too (as
    the TS SDK's src/rpc/client.ts does)."""
    token = token if token is not None else os.environ.get("CONVEYOR_TOKEN")
    return (("authorization", f"Bearer {token}"),) if token else None
