"""The one-machine durable execution store: loads answered from memory, every write on disk."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
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


def test_each_save_on_disk_is_the_execution_in_memory(tmp_path: Path, monkeypatch: Any) -> None:
    """While the execution runs, what a fresh store reads back from the file (the SDK's row with
    the changes folded in) is, after every save, exactly the SDK's JSON of the execution."""
    path = tmp_path / "durable-executions.db"
    store = KeptConnectionStore.create_and_initialize(path)
    assert isinstance(store, KeptConnectionStore)
    save = KeptConnectionStore.save
    differed: list[str] = []
    folded: list[int] = []

    def checked(self: KeptConnectionStore, execution: Any) -> None:
        save(self, execution)
        with self._lock:
            with closing(sqlite3.connect(path)) as db:  # another connection: what is committed
                changes = db.execute("SELECT COUNT(*) FROM execution_changes").fetchone()
            folded.append(int(changes[0]))
            reader = KeptConnectionStore(path)
            on_disk = reader.load(execution.durable_execution_arn).to_json_dict()
            reader.close()
            if on_disk != execution.to_json_dict():
                differed.append(str(len(execution.operations)))

    monkeypatch.setattr(KeptConnectionStore, "save", checked)
    runner = DurableFunctionTestRunner(handler=three_steps, skip_time=False, store=store)
    with runner:
        arn = runner.run_async(input=json.dumps({}), execution_name="e-1", function_name="f")
        runner.wait_for_result(execution_arn=arn, timeout=60)
    store.close()
    assert differed == []
    assert max(folded) > 0  # saves in flight were written as changes
    assert folded[-1] == 0  # the complete execution is the SDK's row alone
    assert SQLiteExecutionStore(path).load(arn).is_complete


KILLED = """
import json, os, signal, sys
from pathlib import Path
from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner
from openagents.local.execution_store import KeptConnectionStore

@durable_execution
def turn(event, context):
    for i in range(5):
        if i == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # after three steps were checkpointed
        context.step(lambda _, i=i: i * 10, name=f"step-{i}")
    return "done"

store = KeptConnectionStore.create_and_initialize(Path(sys.argv[1]))
runner = DurableFunctionTestRunner(handler=turn, skip_time=False, store=store)
with runner:
    arn = runner.run_async(input="{}", execution_name="e-kill", function_name="f")
    print(arn, flush=True)
    runner.wait_for_result(execution_arn=arn, timeout=60)
"""


def test_checkpoints_survive_kill_9(tmp_path: Path) -> None:
    """A process killed mid-execution: the steps it checkpointed are in the file, read back
    with their results by the next process's store."""
    path = tmp_path / "durable-executions.db"
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    done = subprocess.run(
        [sys.executable, str(script), str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    arn = done.stdout.split()[0]
    store = KeptConnectionStore(path)
    execution = store.load(arn)
    store.close()
    assert not execution.is_complete
    steps = {op.name: op for op in execution.operations if op.name and op.name.startswith("step")}
    assert sorted(steps) == ["step-0", "step-1", "step-2"]
    results = [steps[f"step-{i}"].step_details for i in range(3)]
    assert [r.result if r else None for r in results] == ["0", "10", "20"]
