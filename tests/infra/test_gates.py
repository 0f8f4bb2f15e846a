"""The gates: cdk-nag AwsSolutions (inside app.synth) and cfn-lint on the templates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infra import nag
from tests.infra.conftest import Synth

CFN_LINT = Path(sys.executable).with_name("cfn-lint")


def test_cdk_nag_has_no_unacknowledged_findings(stages: tuple[Synth, ...]) -> None:
    for synth in stages:
        (report,) = [r for r in synth.report["pluginReports"] if r["pluginName"] == nag.PACK]
        assert report["conclusion"] == "success"
        assert report["violations"] == []


def test_every_acknowledgement_is_used_and_has_a_reason(stages: tuple[Synth, ...]) -> None:
    suppressed = {
        (v["acknowledgedAt"], v["acknowledgedId"])
        for synth in stages
        for r in synth.report["pluginReports"]
        for v in r["suppressedViolations"]
    }
    stacks = {synth.stack.node.path for synth in stages}
    made = {(a.path, a.id) for a in nag.ACKNOWLEDGED if a.path.split("/")[0] in stacks}
    assert made, "acknowledgements were recorded"
    stale = made - suppressed
    assert not stale, f"acknowledged but no longer found: {sorted(stale)}"
    for ack in nag.ACKNOWLEDGED:
        assert ack.id.startswith(f"{nag.PACK}::{nag.PACK}-")
        assert len(ack.reason) > 30, ack


def test_cfn_lint_is_clean(stages: tuple[Synth, ...]) -> None:
    result = subprocess.run(
        [str(CFN_LINT), "--ignore-checks", "W3005", "--", *(str(s.path) for s in stages)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
