"""The one-machine durable execution store: loads answered from memory, every write on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner
from aws_durable_execution_sdk_python_testing.stores.sqlite import SQLiteExecutionStore
from openagents.local.execution_store import KeptConnectionStore


@durable_execution
def three_steps(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
    total = 0
    for i in range(3):
        total += context.step(_plus_one(i), name=f"step-{i}")
    return {"total": total}


def _plus_one(i: int) -> Any:
    def step(_: Any) -> int:
        return i + 1

    return step


def test_an_execution_is_on_disk_for_the_next_process(tmp_path: Path) -> None:
    path = tmp_path / "durable-executions.db"
    store = KeptConnectionStore.create_and_initialize(path)
    runner = DurableFunctionTestRunner(handler=three_steps, skip_time=False, store=store)
    with runner:
        arn = runner.run_async(input=json.dumps({}), execution_name="e-1", function_name="f")
        result = runner.wait_for_result(execution_arn=arn, timeout=60)
    assert json.loads(str(result.result)) == {"total": 6}
    assert isinstance(store, KeptConnectionStore)
    kept = store.load(arn)
    assert store.load(arn) is kept  # answered from memory
    store.close()
    # another process: the SDK's own store reads the same file
    fresh = SQLiteExecutionStore(path).load(arn)
    assert fresh.is_complete
    steps = [op for op in fresh.operations if op.name and op.name.startswith("step-")]
    assert [op.name for op in steps] == ["step-0", "step-1", "step-2"]
