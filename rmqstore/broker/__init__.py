"""The broker: RocketMQ 4.x's broker and name server roles over a :class:`~rmqstore.MessageStore`.

Real RocketMQ clients produce to and consume from an rmqstore store through this package.
:mod:`.send` (a send becomes a store put), :mod:`.pull` (pulls and long polling),
:mod:`.namesrv` (routes), :mod:`.topics`, :mod:`.offsets` and :mod:`.clients` (the broker's
own tables, in RocketMQ's files), :mod:`.broker` (the assembly), :mod:`.cli` (the command).
"""

from .background import ServiceThread
from .broker import Broker
from .config import BrokerConfig, load_broker_conf
from .namesrv import NameServer

__all__ = ["Broker", "BrokerConfig", "NameServer", "ServiceThread", "load_broker_conf"]
