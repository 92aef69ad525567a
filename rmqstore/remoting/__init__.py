"""RocketMQ 4.x's remoting protocol: frames, codes, an asyncio server and client.

No Jupyter and no store imports: this package only moves RemotingCommands over sockets.
See :mod:`.frame` for the frame and its two header codecs, :mod:`.server` for
connections, opaque matching and the limits that keep a broker alive under bad input,
:mod:`.listener` for the server that accepts them
(:mod:`.budget` the server-wide budget of unsent answers, :mod:`.throttle` the rate limit on
log lines), :mod:`.client` for dialling out and :mod:`.recorder` for a view of the wire.
"""

from .codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, LanguageCode, RequestCode, ResponseCode, SerializeType
from .frame import (BINARY_HEADER_FIELDS, FRAME_FIELDS, MAX_FRAME_LENGTH, FrameDecoder, RemotingCommand,
                    RemotingFrameError, decode_frame, encode_frame)
from .frame_spans import frame_field_spans, header_field_spans
from .client import RemotingClient
from .recorder import FrameRecorder
from .listener import RemotingServer
from .server import Connection, Limits, RemotingTimeoutError, RpcHook

__all__ = [
    "BINARY_HEADER_FIELDS", "Connection", "FRAME_FIELDS", "FrameDecoder", "FrameRecorder", "LanguageCode", "Limits",
    "MAX_FRAME_LENGTH", "RPC_ONEWAY", "RPC_TYPE_RESPONSE", "RemotingClient", "RemotingCommand",
    "RemotingFrameError", "RemotingServer", "RemotingTimeoutError", "RequestCode", "ResponseCode", "RpcHook",
    "SerializeType", "decode_frame", "encode_frame", "frame_field_spans", "header_field_spans",
]
