"""``rmqstore broker STORE``: the broker and an embedded name server in one process.

``rmqstore broker STORE`` listens on 127.0.0.1:10911 (broker) and 127.0.0.1:9876 (name
server routing every topic to this broker), so a RocketMQ client configured with
``namesrv=127.0.0.1:9876`` works at once.  ``--listen HOST:PORT`` and
``--namesrv-listen HOST:PORT`` change the addresses (port 0: any free port),
``--no-namesrv`` leaves the name server out and ``--namesrv ADDR`` registers with separate
ones instead (``rmqstore namesrv [--listen HOST:PORT]`` runs one), ``--config broker.conf`` reads RocketMQ's
own broker.conf (its storePathRootDir is the store when STORE is not given).  ``--role
SYNC_MASTER|ASYNC_MASTER|SLAVE`` (brokerRole) makes a master serve slaves on its HA port
(haListenPort, else the listen port + 1) and a slave replicate from ``--ha-master
HOST:PORT`` (haMasterAddress) or, without it, from the HA address the name servers of
``--namesrv`` answer its registration with; see :mod:`rmqstore.engine.ha`.  ``aclEnable=true`` in broker.conf
checks every request against the ``plain_acl.yml`` beside it (RocketMQ's plain ACL, see
:mod:`rmqstore.broker.acl`); ``--acl FILE`` turns that on with another file.  Loopback unless asked.  SIGINT or SIGTERM stops it cleanly: connections closed, offsets and topics
persisted, the store flushed and shut down, no abort file left.  Exit 0 after a clean
stop, 2 when it cannot start -- an address it cannot listen on is named, with the flag that moves it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from ..common.errors import ListenError, RmqStoreError
from ..common.config import BrokerRole
from .config import BrokerConfig, load_broker_conf, parse_properties_text

__all__ = ["add_broker_parser", "run_broker", "run_namesrv", "parse_host_port"]


def parse_host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "127.0.0.1", int(port)


def add_broker_parser(subparsers) -> argparse.ArgumentParser:
    text = "run a RocketMQ broker (and a name server) on a store: real RocketMQ clients produce and consume"
    p = subparsers.add_parser("broker", help=text, description=text)
    p.add_argument("store", metavar="STORE", nargs="?", help="store root (default: storePathRootDir of --config)")
    p.add_argument("--listen", type=parse_host_port, metavar="HOST:PORT",
                   help="broker address (default 127.0.0.1 and listenPort, 10911)")
    p.add_argument("--namesrv-listen", type=parse_host_port, default=("127.0.0.1", 9876), metavar="HOST:PORT",
                   help="embedded name server address (default 127.0.0.1:9876)")
    p.add_argument("--no-namesrv", action="store_true", help="do not start the embedded name server")
    p.add_argument("--namesrv", metavar="ADDR[;ADDR]", help="register with these name servers every 30 s "
                                                           "(RocketMQ's namesrvAddr; e.g. an `rmqstore namesrv`)")
    p.add_argument("--config", metavar="broker.conf", help="RocketMQ broker.conf (BrokerConfig and "
                                                           "MessageStoreConfig keys)")
    p.add_argument("--role", choices=[r.value for r in BrokerRole],
                   help="brokerRole (default ASYNC_MASTER): a master serves slaves on its HA port (listen port + 1 "
                        "unless haListenPort says otherwise); a SLAVE replicates from --ha-master")
    p.add_argument("--ha-master", metavar="HOST:PORT", help="the master's HA address, for a SLAVE (haMasterAddress; "
                                                           "without it, learned from the --namesrv name server)")
    p.add_argument("--ha-listen", type=parse_host_port, metavar="HOST:PORT",
                   help="a master's HA address (default: the broker's host and haListenPort)")
    p.add_argument("--acl", metavar="FILE", help="check every request against this plain_acl.yml (RocketMQ's plain "
                                                  "ACL; turns aclEnable on). Default with aclEnable=true in "
                                                  "--config: plain_acl.yml beside the broker.conf")
    p.set_defaults(run_command=lambda args, io: run_broker(args, io.stdout, io.stderr))
    text = "run a standalone RocketMQ name server that brokers register with (REGISTER_BROKER every 30 s)"
    n = subparsers.add_parser("namesrv", help=text, description=text)
    n.add_argument("--listen", type=parse_host_port, metavar="HOST:PORT",
                   help="address (default 127.0.0.1 and listenPort of --config, 9876)")
    n.add_argument("--config", metavar="namesrv.conf", help="RocketMQ's namesrv.conf (NamesrvConfig keys: kvConfigPath, "
                                                            "orderMessageEnable, ...; mqnamesrv -c). Default "
                                                            "kvConfigPath: ~/namesrv/kvConfig.json")
    n.set_defaults(run_command=lambda args, io: run_namesrv(args, io.stdout))
    return p


def _configs(args):
    from ..common.config import StoreConfig

    given: dict[str, str] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            text = f.read()
        broker_config, store_config, unknown = load_broker_conf(text)
        broker_config.broker_config_path = os.path.abspath(args.config)  # where UPDATE_BROKER_CONFIG persists
        given = parse_properties_text(text)
    else:
        broker_config, store_config, unknown = BrokerConfig(), StoreConfig(), []
    listen_host = None
    if args.listen:
        listen_host, broker_config.listen_port = args.listen
        if listen_host not in ("0.0.0.0", "::"):
            broker_config.broker_ip1 = listen_host
    if args.namesrv:
        broker_config.namesrv_addr = args.namesrv
    _replication(args, given, broker_config, store_config, listen_host)
    _acl(args, broker_config)
    root = args.store or broker_config.store_path_root_dir
    if not root:
        raise RmqStoreError("give a STORE directory (or storePathRootDir in --config)")
    return root, broker_config, store_config, unknown, listen_host


def _acl(args, broker_config) -> None:
    """``--acl FILE`` turns the plain ACL on with that file; aclEnable=true in broker.conf reads the
    plain_acl.yml beside it (RocketMQ reads conf/plain_acl.yml under its home)."""
    from .acl import DEFAULT_ACL_FILE

    if args.acl:
        broker_config.acl_enable = True
        broker_config.acl_file = args.acl
    elif broker_config.acl_enable and not broker_config.acl_file and args.config:
        broker_config.acl_file = os.path.join(os.path.dirname(os.path.abspath(args.config)), DEFAULT_ACL_FILE)


def _replication(args, given: dict, broker_config, store_config, listen_host) -> None:
    """Role and HA addresses, as RocketMQ's BrokerStartup sets them: a master's HA port is the
    listen port + 1 unless broker.conf names one (an ephemeral listen port: an ephemeral HA port
    too); a slave needs the master's HA address, or a name server to learn it from, and a brokerId
    above 0."""
    if args.role:
        store_config.broker_role = BrokerRole(args.role)
    if args.ha_master:
        store_config.ha_master_address = args.ha_master
    if store_config.broker_role is BrokerRole.SLAVE:
        if not store_config.ha_master_address and not broker_config.namesrv_addr:
            raise RmqStoreError("a SLAVE replicates from its master: give --ha-master HOST:PORT "
                                "(haMasterAddress in broker.conf), or --namesrv ADDR (namesrvAddr) to learn "
                                "the master's HA address from the name server its master registers with")
        if broker_config.broker_id == 0:
            if "brokerId" in given:
                raise RmqStoreError("brokerId=0 is a master's id; a SLAVE's brokerId must be above 0")
            broker_config.broker_id = 1
        return
    store_config.ha_enable = True
    if args.ha_listen:
        store_config.ha_listen_host, store_config.ha_listen_port = args.ha_listen
        return
    store_config.ha_listen_host = listen_host or "127.0.0.1"
    if "haListenPort" not in given:
        port = broker_config.listen_port
        store_config.ha_listen_port = port + 1 if port else 0


#: how each server's address is changed, for the error that says it cannot listen there
MOVE_IT = {
    "broker": "--listen HOST:PORT gives the broker another address (listenPort in broker.conf; port 0: any free "
              "port)",
    "embedded name server": "--namesrv-listen HOST:PORT gives the embedded name server another address, or "
                            "--no-namesrv leaves it out (a name server already running there: --no-namesrv "
                            "--namesrv ADDR registers with it)",
    "master": "--ha-listen HOST:PORT gives the slaves' port another address (haListenPort in broker.conf; by "
              "default the broker's listen port + 1, so --listen moves it too)",
    "name server": "--listen HOST:PORT gives the name server another address (listenPort in namesrv.conf; port 0: "
                   "any free port)",
}


def _cannot_listen(exc: ListenError) -> RmqStoreError:
    """The one line for a server that cannot listen: which server, the address, why, and the way out."""
    hint = MOVE_IT.get(exc.role)
    return RmqStoreError(f"the {exc.role} {exc}" + (f"; {hint}" if hint else ""))


#: ``RMQSTORE_UVLOOP=1`` runs the servers on uvloop's event loop, when uvloop is installed (see :func:`_run`)
UVLOOP_ENV = "RMQSTORE_UVLOOP"


def _run(main) -> None:
    """``asyncio.run(main)``; on uvloop's event loop when ``RMQSTORE_UVLOOP=1`` and uvloop is installed (asyncio's
    own otherwise).  Opt-in: uvloop measured less CPU per send at 1 and 8 JBench threads but no steady gain in
    throughput on a loaded 2-core machine (bench/README.md, issue 23), so it is no dependency yet."""
    factory = None
    if os.environ.get(UVLOOP_ENV, "0") == "1":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


async def _serve(service, banner, stdout, what: str) -> None:
    """Start ``service``, print ``banner()``, run until SIGINT/SIGTERM, stop it."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await service.start()
    try:
        stdout.write(banner())
        stdout.flush()
        await stop.wait()
    finally:
        await service.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    stdout.write(f"{what} stopped cleanly\n")
    stdout.flush()


def _broker_banner(broker) -> str:
    text = f"broker {broker.config.broker_name} listening on {broker.address}, store {broker.store_root}\n"
    store = broker.store
    if store is not None and store.config.broker_role is BrokerRole.SLAVE:
        if not broker.learns_ha_master:
            text += f"SLAVE replicating from {store.config.ha_master_address}\n"
        else:
            learned = store.ha_service.ha_client.master_address or "its master, once registered"
            text += f"SLAVE replicating from {learned} (the name server's answer, {broker.config.namesrv_addr})\n"
    elif store is not None and store.ha_service is not None and store.ha_service.listen_address:
        text += f"{store.config.broker_role.value} serving slaves on {store.ha_service.listen_address}\n"
    if broker.namesrv is not None:
        text += f"name server listening on {broker.namesrv.address}\n"
    return text


def run_namesrv(args, stdout) -> int:
    from .namesrv import NameServer, NamesrvConfig

    config = NamesrvConfig.load(args.config) if args.config else NamesrvConfig.rocketmq_defaults()
    host, port = args.listen or ("127.0.0.1", config.listen_port)
    namesrv = NameServer(host, port, config=config)
    try:
        _run(_serve(namesrv, lambda: f"name server listening on {namesrv.address}\n", stdout, "name server"))
    except ListenError as exc:
        raise _cannot_listen(exc) from None
    return 0


def run_broker(args, stdout, stderr) -> int:
    from .broker import Broker

    root, broker_config, store_config, unknown, listen_host = _configs(args)
    for key in unknown:
        stderr.write(f"rmqstore broker: warning: {args.config}: key {key!r} is not used\n")
    broker = Broker(root, broker_config, store_config, listen_host=listen_host,
                    namesrv_listen=None if args.no_namesrv else args.namesrv_listen)
    try:
        _run(_serve(broker, lambda: _broker_banner(broker), stdout, "broker"))
    except ListenError as exc:
        raise _cannot_listen(exc) from None
    return 0
