"""The address guard's rule, address by address: public unicast passes, everything that reaches this
machine, a local network or a cloud's metadata service is refused with its reason, IPv6 forms that
carry an IPv4 address are judged by it, and `allowAddresses` lets chosen ones through. No traffic:
these are the decisions the transport applies before it connects (tests/tools/web/test_web_fetch.py
shows them applied to real connections on loopback)."""

from __future__ import annotations

from ipaddress import ip_network

import pytest

from klaw.tools.web.addresses import AddressPolicy, parse_address
from klaw.tools.web.errors import AddressRefused
from klaw.tools.web.guarded_transport import GuardedBackend

REFUSED = {
    "127.0.0.1": "loopback",
    "127.8.9.10": "loopback",
    "::1": "loopback",
    "0.0.0.0": "unspecified",
    "10.1.2.3": "private",
    "172.16.0.9": "private",
    "192.168.1.1": "private",
    "fd12:3456::1": "private",
    "169.254.169.254": "cloud metadata",
    "169.254.170.2": "cloud metadata",
    "fd00:ec2::254": "cloud metadata",
    "168.63.129.16": "cloud metadata",
    "100.100.100.200": "cloud metadata",
    "169.254.1.1": "link-local",
    "fe80::1%eth0": "link-local",
    "224.0.0.251": "multicast",
    "239.255.255.250": "multicast",
    "ff02::fb": "multicast",
    "240.0.0.1": "reserved",
    "100.64.0.1": "not a public address",
    "192.0.2.1": "private",  # documentation range
    "::ffff:127.0.0.1": "loopback",  # IPv4-mapped
    "::ffff:169.254.169.254": "cloud metadata",
    "64:ff9b::a00:1": "private",  # NAT64 of 10.0.0.1
    "2002:c0a8:101::1": "private",  # 6to4 of 192.168.1.1
    "fec0::1": "site-local",  # deprecated IPv6 site-local, which Python 3.11 calls global
    "feff::1": "site-local",
    "3fff::1": "documentation",  # RFC 9637
    "64:ff9b::7f00:1": "loopback",  # NAT64 of 127.0.0.1
    "2002:7f00:1::1": "loopback",  # 6to4 of 127.0.0.1
    "64:ff9b:1::a00:1": "reserved",  # local-use NAT64 (RFC 8215)
    "::7f00:1": "reserved",  # IPv4-compatible (deprecated) form of 127.0.0.1
}
ALLOWED = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808", "::ffff:8.8.8.8"]


@pytest.mark.parametrize(("address", "reason"), REFUSED.items())
def test_addresses_that_reach_this_machine_a_local_network_or_metadata_are_refused(address: str, reason: str) -> None:
    refusal = AddressPolicy().refusal(parse_address(address))
    assert refusal is not None and reason in refusal


@pytest.mark.parametrize("address", ALLOWED)
def test_public_unicast_addresses_pass(address: str) -> None:
    assert AddressPolicy().refusal(parse_address(address)) is None


def test_the_allow_list_lets_chosen_addresses_through_and_nothing_else() -> None:
    policy = AddressPolicy([ip_network("192.168.1.20/32"), ip_network("10.0.0.0/24")])
    assert policy.refusal(parse_address("192.168.1.20")) is None
    assert policy.refusal(parse_address("10.0.0.200")) is None
    assert policy.refusal(parse_address("::ffff:10.0.0.7")) is None  # the same host, IPv4-mapped
    assert policy.refusal(parse_address("192.168.1.21")) is not None
    assert policy.refusal(parse_address("10.0.1.1")) is not None
    assert policy.refusal(parse_address("127.0.0.1")) is not None


def test_a_metadata_address_passes_only_an_entry_naming_it_alone() -> None:
    """adversary31 (decision 523): a wide entry let fd00:ec2::254, 100.100.100.200 and 169.254.169.254
    through; a 6to4 address carrying one, under an allowed 2002::/16, is refused as well."""
    wide = AddressPolicy(ip_network(n) for n in ("fd00::/8", "100.64.0.0/10", "169.254.0.0/16", "2002::/16"))
    for metadata in (
        "fd00:ec2::254",
        "100.100.100.200",
        "169.254.169.254",
        "::ffff:169.254.169.254",
        "2002:a9fe:a9fe::1",
    ):
        assert wide.refusal(parse_address(metadata)) == "a cloud metadata service", metadata
    for neighbour in ("fd00:ec2::253", "100.100.100.201", "169.254.1.1", "2002:c000:201::1"):
        assert wide.refusal(parse_address(neighbour)) is None, neighbour
    named = AddressPolicy([ip_network("169.254.169.254"), ip_network("fd00:ec2::254/128")])
    assert named.refusal(parse_address("169.254.169.254")) is None
    assert named.refusal(parse_address("fd00:ec2::254")) is None
    assert named.refusal(parse_address("169.254.170.2")) == "a cloud metadata service"


async def test_a_name_resolving_to_a_public_and_a_private_address_is_refused_before_any_connection() -> None:
    asked: list[tuple[str, int]] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return ["93.184.216.34", "10.0.0.5"]

    backend = GuardedBackend(AddressPolicy(), resolver)
    with pytest.raises(AddressRefused, match=r"intranet\.example \(10\.0\.0\.5\) is private"):
        await backend.connect_tcp("intranet.example", 80)
    assert asked == [("intranet.example", 80)]


async def test_a_metadata_service_is_refused_without_suggesting_it_be_allowed() -> None:
    """newcomer13: the refusal of 169.254.169.254 ended "the person can allow it in engine.yaml,
    web.fetch.allowAddresses", an invitation a model following a page's orders could pass on. A local
    network's address keeps the suggestion (a NAS at home is a person's choice)."""

    async def resolver(host: str, port: int) -> list[str]:
        return [host]

    backend = GuardedBackend(AddressPolicy(), resolver)
    with pytest.raises(AddressRefused) as metadata:
        await backend.connect_tcp("169.254.169.254", 80)
    assert "a cloud metadata service" in str(metadata.value) and "allowAddresses" not in str(metadata.value)
    with pytest.raises(AddressRefused, match=r"web\.fetch\.allowAddresses"):
        await backend.connect_tcp("192.168.1.21", 80)
