"""Subnet addresses at scale (issue 27): each running sandbox holds one address of its subnets
(its task's ENI), so their size is a stage setting (``sandboxSubnetMask``) checked at synth
against the sandboxes the stage must hold (``maxSessions``), with the fix in the error."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import App

from infra.app import compose
from infra.config import StageConfig
from tests.infra.conftest import Synth


def _subnets(synth: Synth, name: str) -> list[ipaddress.IPv4Network]:
    found = []
    for resource in synth.resources("AWS::EC2::Subnet").values():
        tags = {t["Key"]: t["Value"] for t in resource["Properties"].get("Tags", [])}
        if tags.get("aws-cdk:subnet-name") == name:
            found.append(ipaddress.IPv4Network(resource["Properties"]["CidrBlock"]))
    return found


def _usable(subnets: list[ipaddress.IPv4Network]) -> int:
    return sum(subnet.num_addresses - 5 for subnet in subnets)  # AWS keeps 5 per subnet


def test_the_default_stage_holds_its_default_max_sessions(dev: Synth) -> None:
    private = _subnets(dev, "Private")
    assert [s.prefixlen for s in private] == [20, 20]
    config = StageConfig()
    assert config.max_sessions == 1000
    assert _usable(private) >= config.sandbox_addresses >= config.max_sessions


def test_a_larger_sandbox_subnet_is_synthesized_and_holds_ten_thousand(
    synth: Callable[..., Synth],
) -> None:
    stage = synth(stage="big", sandboxSubnetMask="18", maxSessions="10000")
    private = _subnets(stage, "Private")
    assert [s.prefixlen for s in private] == [18, 18]
    assert _usable(private) >= 10_000
    assert all(s.subnet_of(ipaddress.IPv4Network("10.40.0.0/16")) for s in private)
    assert not private[0].overlaps(private[1])


def _compose(**context: Any) -> None:
    compose(App(context={"stage": "cap", **context}))


def test_synth_refuses_more_sessions_than_the_subnets_hold_and_names_the_fix() -> None:
    with pytest.raises(ValueError, match=r"maxSessions 10000: .* hold 8118 .*sandboxSubnetMask=19"):
        _compose(maxSessions="10000")
    with pytest.raises(ValueError, match=r"maxSessions 40000: .*at most 32694 fit this VPC"):
        _compose(maxSessions="40000", sandboxSubnetMask="18")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"sandbox_subnet_mask": 17}, r"sandboxSubnetMask 17: .* largest that fits is /18"),
        ({"sandbox_subnet_mask": 15}, r"sandboxSubnetMask 15: 16-26"),
        ({"sandbox_subnet_mask": 27}, r"sandboxSubnetMask 27: 16-26"),
        ({"max_sessions": 0}, r"maxSessions 0: at least 1"),
        # the isolated sandbox subnets sit after the control plane's /20s: /18 still fits
        ({"sandbox_egress": "none", "max_sessions": 40_000}, r"sandboxSubnetMask=|at most"),
    ],
)
def test_subnet_settings_are_checked(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StageConfig(**values)


def test_isolated_sandboxes_get_the_whole_subnet_and_the_control_plane_keeps_its_own() -> None:
    config = StageConfig(sandbox_egress="none", sandbox_subnet_mask=18, max_sessions=10_000)
    assert config.subnet_layout() == [24, 24, 20, 20, 18, 18]
    assert config.private_subnet_mask == 20
    assert config.sandbox_addresses == 2 * (2**14 - 5)  # no control-plane ENIs among them
    shared = StageConfig(sandbox_subnet_mask=18, max_sessions=10_000)
    assert shared.sandbox_addresses < config.sandbox_addresses
