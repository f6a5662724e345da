"""Which IP addresses `web_fetch` may connect to: public unicast only, unless the person allow-listed more.

A model that reads pages can be talked into fetching `http://169.254.169.254/…` (a cloud's metadata
service, with credentials), `http://localhost:8765/` (klaw's own web page) or a router's admin page.
So every address a fetch would connect to, after DNS resolution and on every redirect, must be a
global unicast address. The rule is "global and not multicast" from `ipaddress` (which knows the IANA
special-purpose registries), plus: IPv6 addresses that carry an IPv4 address (mapped, NAT64, 6to4,
Teredo) are judged by that IPv4 address too, ranges `ipaddress` wrongly calls global (IPv6
site-local fec0::/10) are refused by name, and the cloud metadata endpoints that sit on otherwise
global addresses (Azure's 168.63.129.16) are named and refused. `web.fetch.allowAddresses` lets
chosen addresses or networks through (a NAS at home): the person's decision, written in engine.yaml.
A metadata address stays refused inside an allowed network (fd00::/8 holds AWS's fd00:ec2::254,
100.64.0.0/10 Alibaba's 100.100.100.200): only an entry naming it alone (the bare address, a /32 or
a /128) lets it through, and `klaw config check` and the engine's start warn of either (decision 523).
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

IpAddress = IPv4Address | IPv6Address
IpNetwork = IPv4Network | IPv6Network

# Metadata services of cloud hosts; most are link-local or private anyway, named here for the reason given.
CLOUD_METADATA: frozenset[IpAddress] = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle…
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (a global address)
    )
)
METADATA_REASON = "a cloud metadata service"
_NAT64 = ip_network("64:ff9b::/96")
# Ranges Python 3.11's `ipaddress` calls global although they are not public unicast. fec0::/10 is
# IPv6 site-local: deprecated (RFC 3879) but still routed inside some networks, it means "this site"
# just as fc00::/7 does. 3fff::/20 is the second IPv6 documentation range (RFC 9637), never routed.
_MISCLASSIFIED: tuple[tuple[IpNetwork, str], ...] = (
    (ip_network("fec0::/10"), "site-local (a local network)"),
    (ip_network("3fff::/20"), "private (a documentation range)"),
)


def parse_address(text: str) -> IpAddress:
    """An address as getaddrinfo or a URL gives it (an IPv6 zone `%eth0` is dropped)."""
    return ip_address(text.split("%", 1)[0])


class AddressPolicy:
    """Says whether an address may be connected to, and if not, why (for the model and the person)."""

    def __init__(self, allowed: Iterable[IpNetwork] = ()) -> None:
        self._allowed = tuple(allowed)

    def refusal(self, address: IpAddress) -> str | None:
        """None when `address` may be reached; else a short reason ("private", "cloud metadata"…)."""
        candidates = _judged(address)
        if any(c in CLOUD_METADATA and not self._allows(c) for c in candidates):  # 6to4 in an allowed 2002::/16 too
            return METADATA_REASON
        if any(self._allows(candidate) for candidate in candidates):
            return None
        for candidate in candidates:
            reason = _special(candidate)
            if reason is not None:
                return reason
        return None

    def _allows(self, address: IpAddress) -> bool:
        if address in CLOUD_METADATA:  # a wide entry holding it does not count: only one naming it alone
            return any(net.num_addresses == 1 and net.network_address == address for net in self._allowed)
        return any(address.version == net.version and address in net for net in self._allowed)


def metadata_warnings(allowed: Iterable[IpNetwork]) -> list[str]:
    """`klaw config check`'s and the start's warning for each allowAddresses entry holding a metadata address:
    one naming it alone opens it to web_fetch; a wider one does not, which the person may not expect."""
    said: list[str] = []
    for net in allowed:
        inside = [str(a) for a in sorted((a for a in CLOUD_METADATA if a.version == net.version and a in net), key=int)]
        if not inside:
            continue
        if net.num_addresses == 1:
            said.append(
                f"web.fetch.allowAddresses names {inside[0]}, {METADATA_REASON}: web_fetch may read it, and it"
                " hands out this machine's cloud credentials to whoever asks; remove it unless you mean that"
            )
        else:
            said.append(
                f"web.fetch.allowAddresses entry {net} holds {', '.join(inside)} ({METADATA_REASON}), which"
                " stays refused: web_fetch reaches a metadata address only when an entry names it alone"
            )
    return said


def _special(address: IpAddress) -> str | None:
    if address in CLOUD_METADATA:
        return METADATA_REASON
    if address.is_loopback:
        return "loopback (this machine)"
    if address.is_unspecified:
        return "unspecified (this machine)"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_reserved:
        return "reserved"
    if address.is_private:
        return "private (a local network)"
    for network, reason in _MISCLASSIFIED:
        if address.version == network.version and address in network:
            return reason
    if not address.is_global:  # shared address space (100.64/10, carrier NAT), and the like
        return "not a public address"
    return None


def _judged(address: IpAddress) -> tuple[IpAddress, ...]:
    """The addresses a connection to `address` really reaches: an IPv4-mapped or NAT64 address is its
    IPv4 address; a 6to4 or Teredo address is itself and the IPv4 relays it names."""
    if not isinstance(address, IPv6Address):
        return (address,)
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address in _NAT64:
        return (IPv4Address(int(address) & 0xFFFFFFFF),)
    carried: list[IpAddress] = []
    if address.sixtofour is not None:
        carried.append(address.sixtofour)
    if address.teredo is not None:
        carried.extend(address.teredo)
    return (*carried, address)
