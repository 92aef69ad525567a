"""RocketMQ 4.9.8's plain ACL on the broker: who may send and pull what.

With ``aclEnable=true`` in broker.conf (or ``--acl FILE``) the broker reads the rules of a
``plain_acl.yml`` and checks every request before its processor: the signature the client's
keys put on it, and the permission its request code needs on its topics and groups.  ACL off
(the default) installs nothing.  The modules, one job each:

* :mod:`.signature` -- what a client signs and how (``AclClientRPCHook``);
* :mod:`.addresses` -- the white-address patterns (``RemoteAddressStrategyFactory``);
* :mod:`.permissions` -- PUB/SUB/DENY and the request-code table (``Permission``, ``parse``);
* :mod:`.plain` -- the plain_acl.yml model and loader;
* :mod:`.validator` -- the decision, the refusal, and the reload (``PlainPermissionManager``).

The name server has no ACL, as in 4.9.8.
"""

from __future__ import annotations

import os

from .addresses import RemoteAddressStrategy, expand_ip, remote_address_strategy
from .errors import AclConfigError, AclRefusal
from .permissions import ADMIN_CODES, Perm, check_permission, java_hash_order, needed_resources, parse_perm
from .plain import PlainAccount, PlainAcl, load_plain_acl, parse_plain_acl
from .signature import cal_signature, combine_request_content, sign_request
from .validator import ACL_EXCEPTION, AccessRequest, PlainAccessValidator, PlainPermissionManager

__all__ = ["RemoteAddressStrategy", "expand_ip", "remote_address_strategy", "AclConfigError", "AclRefusal",
           "ADMIN_CODES", "Perm", "check_permission", "java_hash_order", "needed_resources", "parse_perm",
           "PlainAccount", "PlainAcl", "load_plain_acl", "parse_plain_acl", "cal_signature",
           "combine_request_content", "sign_request", "ACL_EXCEPTION", "AccessRequest", "PlainAccessValidator",
           "PlainPermissionManager", "install_acl", "DEFAULT_ACL_FILE", "DIFFERENCES"]

#: where the plain ACL deliberately differs from RocketMQ 4.9.8's
DIFFERENCES = {
    "acl_batch_send": "A SEND_BATCH_MESSAGE needs PUB on its topic like any send; 4.9.8's request-code table "
                      "has no entry for it, so a batch reaches a topic the account may not publish to.",
    "acl_strict_file": "An unknown permission (4.9.8 reads it as DENY), an access key given twice (4.9.8 keeps "
                       "the first), a res=perm entry that is not one or a missing plain_acl.yml (4.9.8 creates "
                       "an empty one and refuses everyone) stop the broker naming the file and the problem.",
    "acl_remark_frame": "A refusal's remark is 4.9.8's without the Java stack frame it appends "
                        "(', org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(...:684)').",
    "acl_reload": "The file is looked at at most every 5 s when a request comes, not by a thread of its own; "
                  "a deleted file, like a broken or emptied one, keeps the rules before it.",
}

#: the file's name, looked for in the folder of broker.conf
DEFAULT_ACL_FILE = "plain_acl.yml"


def install_acl(server, config) -> PlainAccessValidator | None:
    """With ``config.acl_enable``, the validator of ``config.acl_file``, installed as ``server``'s first RPC
    hook; None (and nothing installed) without.  A file that cannot be used raises :class:`AclConfigError`."""
    if not config.acl_enable:
        return None
    if not config.acl_file:
        raise AclConfigError(f"aclEnable=true needs the rules file: give --acl FILE, or put {DEFAULT_ACL_FILE} "
                             "beside the broker.conf")
    validator = PlainAccessValidator(PlainPermissionManager(os.path.abspath(config.acl_file)))
    server.rpc_hooks.insert(0, validator)
    return validator
