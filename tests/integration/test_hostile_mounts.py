"""What a sandbox can learn of the host from its own mount table and first process (issue 22):
``/proc/self/mountinfo`` shows each mount's source path within its file system, so a bind of a
host folder named the state folder (the home: the JWT secret, the sandbox key, every sandbox)
and the server's checkout. The sandbox's ``/etc`` and sandboxd's code are now copies in a tmpfs
of their own (the source shows as ``/``), and sandboxd's environment names nothing of the host."""

from __future__ import annotations

from pathlib import Path

from openagents.sandbox.local import LocalDriver

from tests.integration.test_sandbox_isolation import SANDBOXD, driver, machine, run

__all__ = ["driver", "machine"]  # the fixtures, shared with the isolation suite


def test_the_mount_table_and_environment_name_nothing_of_the_host(
    driver: LocalDriver, tmp_path: Path
) -> None:
    handle = driver.start("mounts", 1)
    seen = run(
        driver,
        handle,
        "cat /proc/self/mountinfo; tr '\\0' '\\n' < /proc/1/environ; "
        "tr '\\0' '\\n' < /proc/2/environ; tr '\\0' ' ' < /proc/2/cmdline",
    )
    assert seen.exit_code == 0, seen
    text = seen.stdout
    checkout = str(SANDBOXD.parents[1])
    for host_path in (str(tmp_path), checkout, "/root", "/home"):
        assert host_path not in text, f"{host_path} is visible inside the sandbox:\n{text}"
    sources = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[0].isdigit():
            sources[fields[4]] = fields[3]  # mount point -> its source within its file system
    assert sources["/etc"] == "/"
    assert sources["/opt/sandboxd/sandboxd"] == "/"
    assert run(driver, handle, "cat /etc/passwd").stdout.startswith("root:")  # still there
