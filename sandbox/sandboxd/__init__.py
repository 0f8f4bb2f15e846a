"""sandboxd: the small daemon inside every sandbox.

Standard library only. It serves a JSON-over-HTTP protocol (see ``sandbox/README.md``) for one
workspace folder: exec, files, git (and publishing it), workspace preparation, snapshot and
restore. Every request carries the per-sandbox bearer token given in the ``SANDBOXD_TOKEN``
environment variable (or on stdin with ``--token-stdin``). It starts one way, with its parent
folder on ``PYTHONPATH``:

    SANDBOXD_TOKEN=... python3 -P -m sandboxd --host 127.0.0.1 --port 0 --workspace /workspace
    SANDBOXD_TOKEN=... python3 -P -m sandboxd --unix /run/sandboxd/sandboxd.sock --workspace /ws

(``-P``: the working directory, the workspace, is never on ``sys.path``), prints
``{"ready": true, "port": N}`` (or ``{"ready": true, "socket": PATH}``) on stdout once
listening and logs JSON lines on stderr. The one-machine driver uses the Unix socket: the
sandbox has no network path to the host, only that socket, bind-mounted out of it.

Modules: ``http`` (server, bearer-token check, bodies, answers), ``request`` (the request
protocol, all an endpoint sees of ``http``: body, streamed answers, upgrades) and ``routes``
(the route table, handed to the server by ``__main__``); the endpoints ``exec``, ``files``,
``git`` (branch, status), ``diff``, ``checkpoints``, ``prepare`` (clone), ``push`` (commit,
upstream, remote), ``bundle`` (archive, bundle, bundle restore), ``snapshot`` and ``restore``;
their support: ``app`` (state), ``workspace`` (path confinement), ``process`` (children),
``fields``, ``errors``, ``log``. No git credential ever reaches sandboxd: the control plane
does every authenticated git network call and exchanges bundles with the sandbox.
"""
