"""Hostile sandbox, round two (issue 22, low), from inside real sandboxes: a neighbour on the
host's own on-link subnet (public or TEST-NET, not a private range) is refused like the host,
and TCP to the sandbox's DNS address is no relay to the host's resolver."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator

import pytest
from openagents.sandbox.confine import connected_subnets
from openagents.sandbox.local import LocalDriver

from tests.integration.test_sandbox_isolation import CONNECT, driver, machine, run

__all__ = ["driver", "machine"]  # the fixtures, shared with the isolation suite

NEIGHBOUR_NET = "198.51.100"  # TEST-NET-2: not a private range, so only the subnet rule refuses it
HOST_SIDE = f"{NEIGHBOUR_NET}.1"
NEIGHBOUR = f"{NEIGHBOUR_NET}.2"


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


@pytest.fixture
def neighbour() -> Iterator[int]:
    """A machine beside the host on a subnet the host is connected to: a network namespace at
    the end of a veth pair, serving HTTP; the host can reach it, so slirp could."""
    name = f"oa-nb-{threading.get_ident() % 100000}"
    sh("ip", "netns", "add", name)
    try:
        sh("ip", "link", "add", f"{name}-h", "type", "veth", "peer", "name", f"{name}-n")
        sh("ip", "link", "set", f"{name}-n", "netns", name)
        sh("ip", "addr", "add", f"{HOST_SIDE}/24", "dev", f"{name}-h")
        sh("ip", "link", "set", f"{name}-h", "up")
        sh("ip", "-n", name, "addr", "add", f"{NEIGHBOUR}/24", "dev", f"{name}-n")
        sh("ip", "-n", name, "link", "set", f"{name}-n", "up")
        sh("ip", "-n", name, "link", "set", "lo", "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", name, "python3", "-c", NEIGHBOUR_SERVER],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())  # it listens before it prints
            yield port
        finally:
            server.kill()
            server.wait()
    finally:
        subprocess.run(["ip", "link", "del", f"{name}-h"], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


NEIGHBOUR_SERVER = f"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"neighbour service")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("{NEIGHBOUR}", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def test_a_neighbour_on_the_hosts_own_subnet_is_refused(
    driver: LocalDriver, neighbour: int
) -> None:
    reached = subprocess.run(
        ["curl", "-s", "--max-time", "10", f"http://{NEIGHBOUR}:{neighbour}/"],
        capture_output=True,
        text=True,
    )
    assert reached.stdout == "neighbour service"  # the host reaches it: so could slirp
    handle = driver.start("subnet", 1)  # started after the subnet exists: its firewall knows it
    result = run(driver, handle, CONNECT % json.dumps([[NEIGHBOUR, neighbour]]))
    answers = json.loads(result.stdout)
    assert answers[f"{NEIGHBOUR}:{neighbour}"].startswith("refused"), answers


def test_tcp_to_the_dns_address_is_no_relay_to_the_hosts_resolver(driver: LocalDriver) -> None:
    """slirp relays TCP to 10.0.2.3:53 to the host's resolver as a plain stream; DNS there is
    UDP only."""
    handle = driver.start("dns-tcp", 1)
    result = run(driver, handle, CONNECT % json.dumps([["10.0.2.3", 53]]))
    assert json.loads(result.stdout) == {"10.0.2.3:53": "refused: ConnectionRefusedError"}


ROUTE = """Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0
eth1\t000010AC\t010010AC\t0003\t0\t0\t0\t0000FFFF\t0\t0\t0
"""
IPV6_ROUTE = (
    "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n"
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0\n"
    "fd000000000000000000000000000002 80 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000000 00000003 00000000 80200001     eth0\n"
    "ff000000000000000000000000000000 08 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000003 00000000 00000001     eth0\n"
    "00000000000000000000000000000001 80 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo\n"
)


def test_connected_subnets_are_the_on_link_routes_only() -> None:
    """The default route, a gatewayed route, loopback, host routes and multicast are not."""
    assert connected_subnets(ROUTE, IPV6_ROUTE) == (["192.0.2.0/24"], ["fd00::/64"])
