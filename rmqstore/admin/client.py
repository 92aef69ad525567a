"""The admin client's core: one connection per server, requests signed when credentials are given, and every
failure turned into one of the project's errors.

:class:`AdminClient` holds a pool of :class:`~rmqstore.remoting.RemotingClient` s, one per address, opened on first
use and reopened when the server closed it (a broker drops a connection idle for 120 s; a live view polling every
few seconds keeps its sockets).  Requests to the same server go over the same connection at the same time --
the remoting layer matches answers by opaque -- so a view that gathers a dozen figures with ``asyncio.gather``
waits about one round trip, not twelve.

What can go wrong, and what it becomes (:mod:`rmqstore.common.errors`):

* the server answers with another code than the request expects: :class:`~rmqstore.common.errors.AdminError` carrying
  RocketMQ's ``code`` and ``remark`` (printed ``CODE: 17  DESC: ...`` as mqadmin prints them);
* no answer within the timeout: :class:`~rmqstore.common.errors.AdminTimeoutError` (also a ``TimeoutError``);
* the server cannot be reached or closes the connection: :class:`~rmqstore.common.errors.AdminConnectionError` (also a
  ``ConnectionError``), naming the address;
* the answer's body does not parse: :class:`~rmqstore.common.errors.AdminError` with no code (:meth:`AdminClient.decode`).

A request to the name servers (:meth:`AdminClient.ask_namesrv`) goes to the first one that answers, in the order
given (``"a:9876;b:9876"``, RocketMQ's separator): a server that is down or silent hands over to the next, a
refusal does not.  With ``access_key`` and ``secret_key`` every request is signed as RocketMQ's
``AclClientRPCHook`` signs it (:func:`rmqstore.broker.acl.signature.sign_request`), name servers' too.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Iterable, Sequence

from ..broker.acl.signature import sign_request
from ..common.errors import AdminConnectionError, AdminError, AdminTimeoutError
from ..remoting import RemotingClient, RemotingCommand, RemotingTimeoutError, ResponseCode
from ..remoting.codes import MQVersion, request_name

__all__ = ["AdminClient", "DEFAULT_TIMEOUT", "split_addresses", "parse_address", "LANGUAGE"]

#: seconds a request may take (DefaultMQAdminExt's timeoutMillis is 5000)
DEFAULT_TIMEOUT = 5.0
#: the language our requests carry (RocketMQ's ``LanguageCode.PYTHON``)
LANGUAGE = "PYTHON"


def split_addresses(addresses: str | Iterable[str]) -> list[str]:
    """``"a:9876;b:9876"`` (RocketMQ's name-server list) or an iterable of addresses, as a list; ValueError when
    there is none or one is not ``host:port``."""
    parts = addresses.split(";") if isinstance(addresses, str) else list(addresses)
    out = [p.strip() for p in parts if p and p.strip()]
    if not out:
        raise ValueError(f"no name server address in {addresses!r}")
    for address in out:
        parse_address(address)
    return out


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:9876"`` too) as (host, port); ValueError naming a bad one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address!r} is not host:port")
    return (host[1:-1] if host.startswith("[") and host.endswith("]") else host), int(port)


class AdminClient:
    """Connections to name servers and brokers, and the one way requests go over them (see the module)."""

    def __init__(self, namesrv: str | Iterable[str], *, timeout: float = DEFAULT_TIMEOUT,
                 access_key: str | None = None, secret_key: str | None = None, security_token: str | None = None):
        self.name_servers = split_addresses(namesrv)
        self.timeout = float(timeout)
        if (access_key is None) != (secret_key is None):
            raise ValueError("ACL needs both access_key and secret_key")
        self._credentials = (access_key, secret_key, security_token) if access_key is not None else None
        self._clients: dict[str, RemotingClient] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    # -- connections --------------------------------------------------------------------------------------------
    async def _connection(self, address: str, timeout: float) -> RemotingClient:
        lock = self._opening.setdefault(address, asyncio.Lock())
        async with lock:
            client = self._clients.get(address)
            if client is not None and client.connection is not None and not client.connection.closed.is_set():
                return client
            if client is not None:
                await client.close()
            try:
                host, port = parse_address(address)
            except ValueError as exc:
                raise AdminConnectionError(f"cannot reach {address!r}: {exc}", address=address) from None
            try:
                client = await asyncio.wait_for(RemotingClient().connect(host, port), timeout)
            except asyncio.TimeoutError:
                raise AdminTimeoutError(f"cannot reach {address}: no connection in {timeout:g} s",
                                        address=address) from None
            except OSError as exc:
                raise AdminConnectionError(f"cannot reach {address}: {exc.strerror or exc}", address=address) from None
            self._clients[address] = client
            return client

    async def _drop(self, address: str) -> None:
        client = self._clients.pop(address, None)
        if client is not None:
            await client.close()

    async def close(self) -> None:
        """Close every connection (the client may be used again: connections reopen on demand)."""
        for address in list(self._clients):
            await self._drop(address)

    # the ServiceThread protocol (a service with start and stop coroutines): the blocking Admin runs us on a loop
    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        await self.close()

    # -- requests -------------------------------------------------------------------------------------------------
    def command(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
                language: str = LANGUAGE) -> RemotingCommand:
        """A request as RocketMQ's clients build it: the header's values as text (None left out), signed when the
        client has credentials."""
        fields = {k: ("true" if v is True else "false" if v is False else str(v))
                  for k, v in (ext or {}).items() if v is not None}
        request = RemotingCommand(int(code), fields, body, language=language, version=MQVersion.V4_9_8)
        if self._credentials is not None:
            access_key, secret_key, token = self._credentials
            sign_request(request, access_key, secret_key, token)
        return request

    async def invoke(self, address: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", *,
                     timeout: float | None = None, language: str = LANGUAGE) -> RemotingCommand:
        """The server's answer to one request, whatever its code; AdminTimeoutError or AdminConnectionError when
        there is none."""
        wait = self.timeout if timeout is None else timeout
        client = await self._connection(address, wait)
        request = self.command(code, ext, body, language)
        what = request_name(code)
        try:
            return await client.invoke(request, wait)
        except RemotingTimeoutError:
            raise AdminTimeoutError(f"{what} to {address}: no answer in {wait:g} s", address=address,
                                    request=code) from None
        except (ConnectionError, OSError) as exc:
            await self._drop(address)
            raise AdminConnectionError(f"{what} to {address}: the connection failed ({exc})", address=address,
                                       request=code) from None

    async def request(self, address: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", *,
                      ok: Sequence[int] = (ResponseCode.SUCCESS,), timeout: float | None = None,
                      language: str = LANGUAGE) -> RemotingCommand:
        """Like :meth:`invoke`, and an answer whose code is not in ``ok`` raises :func:`refusal`."""
        response = await self.invoke(address, code, ext, body, timeout=timeout, language=language)
        if response.code not in ok:
            raise refusal(address, code, response)
        return response

    async def ask_namesrv(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", *,
                          ok: Sequence[int] = (ResponseCode.SUCCESS,)) -> tuple[str, RemotingCommand]:
        """(the name server that answered, its answer): the first of :attr:`name_servers` that answers."""
        failures: list[AdminError] = []
        for address in self.name_servers:
            try:
                return address, await self.request(address, code, ext, body, ok=ok)
            except (AdminConnectionError, AdminTimeoutError) as exc:
                failures.append(exc)
        if len(failures) == 1:
            raise failures[0]
        raise AdminConnectionError(f"no name server answered {request_name(code)}: "
                                   + "; ".join(str(f) for f in failures), request=code)

    @staticmethod
    def decode(address: str, code: int, decoder: Callable[..., Any], *args: Any) -> Any:
        """``decoder(*args)``, its ValueError (or a KeyError, TypeError from a shape it did not expect) made an
        AdminError naming the request and the server."""
        try:
            return decoder(*args)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AdminError(f"{request_name(code)} to {address}: the answer does not parse: {exc}", address=address,
                             request=code) from None


def refusal(address: str, code: int, response: RemotingCommand) -> AdminError:
    """The error for an answer refusing a request: RocketMQ's code and remark, as mqadmin prints them."""
    remark = response.remark or ""
    return AdminError(f"{request_name(code)} to {address} refused: CODE: {response.code}  DESC: {remark}",
                      code=response.code, remark=response.remark, address=address, request=code)
