"""The Lepton backend against the leptonai SDK itself: the SDK's own client talks to a local
HTTP server that records each request and answers with the SDK's own models, as the API does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from nrl_launch.backends import Phase, state_phase
from nrl_launch.errors import (
    ConfigError,
    ExitCode,
    JobNotFoundError,
    JobNotRunningError,
    SchedulerError,
    UnconfirmedSubmitError,
    UsageError,
)
from nrl_launch.spec import LaunchSpec
from tests.conftest import Cli, shellcheck, unavailable
from tests.helpers import imported, roots

TOKEN = "test-token-4f7a"  # the workspace token the fake API expects
SECRET_VALUE = "hf-value-never-sent"  # an HF_TOKEN in this shell: it must reach no request
WORKSPACE = "ws1"
BASE = f"/api/v2/workspaces/{WORKSPACE}"
CREATED_ID = "grpo-2node-x7k2q"  # the id Lepton gives the created job (its name, suffixed)

JOB = {
    "backend": "lepton",
    "slurm": {"job_name": "grpo-2node", "nodes": 2, "gpus_per_node": 8},
    "container": {"image": "nvcr.io/nvidia/nemo-rl:v0.6.0"},
    "driver": {"command": ["uv", "run", "examples/run_grpo.py"], "workdir": "/opt/nemo-rl"},
    "logs": {"base_dir": "/mnt/shared/nrl-logs"},
    "env": {"WANDB_PROJECT": "grpo", "NCCL_IGNORE_CPU_AFFINITY": "0"},
    "secrets": {"HF_TOKEN": "required", "WANDB_API_KEY": "optional", "EXTRA": "optional"},
    "lepton": {
        "resource_shape": "gpu.8xh100-80gb",
        "node_group": "h100-pool",
        "image_pull_secrets": ["ngc-registry"],
        "mounts": [{"source": "node-nfs:az-files", "path": "/", "mount_path": "/mnt/shared"}],
        "secret_refs": {"WANDB_API_KEY": "wandb-key"},
        "shared_memory_mib": 65536,
        "max_failure_retry": 1,
    },
}


def spec_of(**changes: Any) -> LaunchSpec:
    data = json.loads(json.dumps(JOB))
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        node = data
        for part in parents:
            node = node[part]
        node[key] = value
    return LaunchSpec.model_validate(data)


@pytest.fixture
def sdk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The SDK, with no workspace but what a test gives it: none in the environment, and an
    empty saved record (the SDK reads `lep login`'s file once, when first imported)."""
    if importlib.util.find_spec("leptonai") is None:
        unavailable("leptonai is not installed: pip install -e '.[dev,local,lepton]'")
    from leptonai.api.v2 import workspace_record

    record = workspace_record.WorkspaceRecord
    for name in list(os.environ):
        if name.startswith("LEPTON_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(record, "WORKSPACE_FILE", tmp_path / "lepton" / "workspace_info.yaml")
    monkeypatch.setattr(record, "_singleton_record", workspace_record._LocalWorkspaceRecord())
    return record


def lepton_backend() -> Any:
    from nrl_launch.backends import lepton

    return lepton


@dataclass(frozen=True)
class Ref:
    job_id: str
    log_dir: str = "/mnt/shared/nrl-logs/x-logs"
    script_path: str = "/dev/null"
    pid: int | None = None


# ---- The fake API ----


@dataclass
class Call:
    method: str
    path: str  # under the workspace's base URL
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    raw: bytes


@dataclass
class FakeLepton:
    """Answers by (method, path): (status, JSON); anything else is a 404, as the API says it."""

    url: str
    answers: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    def answer(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.answers[(method, path)] = (status, body)

    def sent(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]


def _handler(api: FakeLepton) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            url = urlsplit(self.path)
            path = url.path.removeprefix(BASE)
            api.calls.append(
                Call(
                    self.command,
                    path,
                    parse_qs(url.query),
                    dict(self.headers.items()),
                    json.loads(raw) if raw else None,
                    raw,
                )
            )
            status, body = api.answers.get(
                (self.command, path), (404, {"code": "not_found", "message": f"no {path}"})
            )
            out = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def api(sdk: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLepton]:
    """A workspace (id, token and URL in the environment, as a CI job would set them) whose API
    is a local server."""
    assert sdk.current() is None  # no workspace saved: only the environment's is used
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    fake = FakeLepton(url=f"http://127.0.0.1:{server.server_address[1]}{BASE}")
    server.RequestHandlerClass = _handler(fake)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    monkeypatch.setenv("LEPTON_WORKSPACE_ID", WORKSPACE)
    monkeypatch.setenv("LEPTON_WORKSPACE_TOKEN", TOKEN)
    monkeypatch.setenv("LEPTON_WORKSPACE_URL", fake.url)
    for proxy in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("HF_TOKEN", SECRET_VALUE)
    yield fake
    server.shutdown()
    server.server_close()


def lepton_job(job_id: str, state: str | None, **status: int) -> dict[str, Any]:
    """A job as the API answers it, built with the SDK's models."""
    from leptonai.api.v2.types.common import Metadata
    from leptonai.api.v2.types.job import LeptonJob, LeptonJobStatus, LeptonJobUserSpec

    job = LeptonJob(
        metadata=Metadata.model_validate({"id": job_id, "created_at": 1_700_000_000_000}),
        spec=LeptonJobUserSpec(completions=2, parallelism=2),
        status=None
        if state is None
        else LeptonJobStatus.model_validate({"state": state, **status}),
    )
    return job.model_dump(by_alias=True, exclude_none=True, mode="json")


def node_groups(**ids_by_name: str) -> list[dict[str, Any]]:
    from leptonai.api.v2.types.common import Metadata
    from leptonai.api.v2.types.dedicated_node_group import (
        DedicatedNodeGroup,
        DedicatedNodeGroupSpec,
        DedicatedNodeGroupStatus,
    )

    return [
        DedicatedNodeGroup(
            metadata=Metadata.model_validate({"id": ng_id, "name": name}),
            spec=DedicatedNodeGroupSpec(),
            status=DedicatedNodeGroupStatus(),
        ).model_dump(by_alias=True, exclude_none=True, mode="json")
        for name, ng_id in ids_by_name.items()
    ]


def replicas(*ids: str) -> list[dict[str, Any]]:
    from leptonai.api.v2.types.common import Metadata
    from leptonai.api.v2.types.replica import Replica

    return [
        Replica.model_validate(
            {"metadata": Metadata.model_validate({"id": i}), "id": i}
        ).model_dump(by_alias=True, exclude_none=True, mode="json")
        for i in ids
    ]


# ---- The command every worker runs ----


def run_worker(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", command],
        env={"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_run_command_writes_the_script_and_runs_it(tmp_path: Path) -> None:
    from nrl_launch.backends.lepton import run_command

    script = (
        "#!/usr/bin/env bash\n"
        'echo "args: $1 from $(basename "$(dirname "$0")")"\n'
        'cat "$0"\n'
        "exit 0\n"
        "# kept as written: 'quotes' \"too\" `ticks` $(not run) \\ EOF\n"
        "EOF\n"
        "'an unclosed quote, never read\n"
    )
    first = run_worker(run_command(script), tmp_path)
    second = run_worker(run_command(script), tmp_path)
    assert first.returncode == 0, first.stderr
    head, _, copy = first.stdout.partition("\n")
    assert head.startswith("args: lepton from nrl-launch.")
    assert copy == script  # byte for byte: the heredoc expanded nothing
    # Each worker writes its own copy (workers may share /tmp).
    assert len(list(tmp_path.glob("nrl-launch.*/job.sh"))) == 2
    assert second.stdout.partition("\n")[0] != head


def test_run_command_refuses_a_script_with_its_end_marker_as_a_line() -> None:
    from nrl_launch.backends.lepton import _HEREDOC_END, run_command

    with pytest.raises(ValueError, match=f"has a line {_HEREDOC_END}"):
        run_command(f"echo hi\n{_HEREDOC_END}\nrm -rf /\n")


def test_run_command_keeps_the_end_marker_inside_a_line(tmp_path: Path) -> None:
    from nrl_launch.backends.lepton import _HEREDOC_END, run_command

    script = f"printf '%s\\n' ' {_HEREDOC_END}' '{_HEREDOC_END}'\n"
    ran = run_worker(run_command(script), tmp_path)
    assert (ran.returncode, ran.stdout) == (0, f" {_HEREDOC_END}\n{_HEREDOC_END}\n")


@pytest.mark.usefixtures("sdk")
@pytest.mark.parametrize("made", [["timeline"], ["spec.json"]])
def test_a_worker_waits_for_the_timeline_and_its_steps_never_get_the_spec(
    tmp_path: Path, made: list[str]
) -> None:
    """Worker K > 0 starts once worker 0's start_log_dir is done (the timeline, written last;
    spec.json is missing from a job submitted by hand), without NRL_JOB_SPEC."""
    from tests.conftest import source_job

    script, _ = planned(spec_of(ray={"auth": "off"}))
    log_dir = tmp_path / "job-logs"
    log_dir.mkdir()
    for name in made:
        (log_dir / name).write_text("")
    (log_dir / "job.sh").write_text('printf "%s\\n" "$1 ${NRL_JOB_SPEC-unset}"\n')
    probe = "NRL_HEAD_START_TIMEOUT=1; resolve_head() { :; }; lepton_worker 1"
    done = subprocess.run(
        ["bash", "-c", source_job(script) + probe],
        env={"PATH": os.environ["PATH"], "NRL_LOG_DIR": str(log_dir), "NRL_JOB_SPEC": "{}"},
        capture_output=True,
        text=True,
        check=False,
    )
    if made == ["timeline"]:
        assert (done.returncode, done.stdout) == (0, "worker unset\n"), done.stderr
    else:
        assert done.returncode == 1 and "saw no log dir" in done.stderr, done.stderr


# ---- plan: the job, field by field ----


def planned(spec: LaunchSpec) -> tuple[str, dict[str, Any]]:
    request = lepton_backend().BACKEND.plan(spec)
    assert request.argv == ()  # nothing is run: the job is sent
    assert request.job_spec is not None
    return request.script, json.loads(request.job_spec)


@pytest.mark.usefixtures("sdk")
def test_plan_builds_the_job_with_the_sdk() -> None:
    given = spec_of()
    script, job = planned(given)
    spec = job["spec"]
    assert job["metadata"] == {"id": "grpo-2node"}
    assert spec["completions"] == spec["parallelism"] == 2
    assert spec["intra_job_communication"] is True
    assert spec["resource_shape"] == "gpu.8xh100-80gb"
    assert spec["affinity"] == {"allowed_dedicated_node_groups": ["h100-pool"]}  # by name
    assert spec["container"]["image"] == "nvcr.io/nvidia/nemo-rl:v0.6.0"
    command = spec["container"]["command"]
    assert command[:2] == ["/bin/bash", "-c"]
    assert command[2] == lepton_backend().run_command(script)
    assert spec["mounts"] == [
        {"from": "node-nfs:az-files", "path": "/", "mount_path": "/mnt/shared"}
    ]
    assert spec["image_pull_secrets"] == ["ngc-registry"]
    assert spec["shared_memory_size"] == 65536
    assert spec["max_failure_retry"] == 1
    assert spec["ttl_seconds_after_finished"] == 3 * 24 * 3600
    # The full spec travels in the job's environment (worker 0 writes it to spec.json).
    assert spec["envs"][2]["name"] == "NRL_JOB_SPEC"
    assert json.loads(spec["envs"][2]["value"]) == given.model_dump(mode="json")
    assert spec["envs"] == [
        {"name": "NCCL_IGNORE_CPU_AFFINITY", "value": "0"},  # the job's own value wins
        {"name": "WANDB_PROJECT", "value": "grpo"},
        {"name": "NRL_JOB_SPEC", "value": spec["envs"][2]["value"]},
        {"name": "HF_TOKEN", "value_from": {"secret_name_ref": "HF_TOKEN"}},
        {"name": "WANDB_API_KEY", "value_from": {"secret_name_ref": "wandb-key"}},
    ]  # EXTRA is optional and no Lepton secret is named for it: left out


@pytest.mark.usefixtures("sdk")
def test_plan_script_runs_in_the_image_without_pyxis() -> None:
    script, job = planned(spec_of())
    assert script.startswith("#!/usr/bin/env bash\n")
    # The image is the job's own (and in its spec, NRL_JOB_SPEC), never the script's.
    assert "--container-image" not in script and "nvcr.io/nvidia/nemo-rl" not in script
    (spec_json,) = [e["value"] for e in job["spec"]["envs"] if e["name"] == "NRL_JOB_SPEC"]
    assert "nvcr.io/nvidia/nemo-rl" in spec_json
    assert "NRL_CONTAINER_WORKDIR=''" in script


@pytest.mark.usefixtures("sdk")
def test_plan_sets_nccl_defaults_the_job_does_not() -> None:
    _, job = planned(spec_of(env={}))
    assert {"name": "NCCL_IGNORE_CPU_AFFINITY", "value": "1"} in job["spec"]["envs"]
    assert all(env["name"] != "NCCL_DEBUG" for env in job["spec"]["envs"])


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"slurm__job_name": "nightly-by-lepton"},
            "slurm.job_name: Job name cannot end with 'by-lepton'.",
        ),
        (
            {"env": {"LEPTON_JOB_NAME": "x"}},
            "env.LEPTON_JOB_NAME: You have used a reserved environment variable name",
        ),
        (
            {
                "lepton__mounts": [{"source": "node-nfs:v", "mount_path": "/opt"}],
                "logs__base_dir": "/opt/logs",
            },
            "lepton.mounts: mount_path '/opt': Mount path '/opt' is reserved by Lepton",
        ),
    ],
)
@pytest.mark.usefixtures("sdk")
def test_plan_refuses_what_the_sdk_refuses(changes: dict[str, Any], line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        planned(spec_of(**changes))
    (problem,) = refused.value.problems
    assert problem.startswith(line) and "\n" not in problem
    assert refused.value.exit_code == ExitCode.BAD_INPUT


def test_plan_without_the_sdk_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "leptonai" or m.startswith("leptonai.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "leptonai", None)
    with pytest.raises(UsageError) as refused:
        lepton_backend().BACKEND.plan(spec_of())
    assert refused.value.message == (
        "backend lepton needs the leptonai SDK: pip install 'nrl-launch[lepton]'"
    )
    assert refused.value.exit_code == ExitCode.BAD_INPUT


# ---- submit ----


def submit(request: Any) -> str:
    submitted = lepton_backend().BACKEND.submit(
        request, job_id="", cwd=Path.cwd(), output=Path("/dev/null")
    )
    assert submitted.pid is None
    return str(submitted.job_id)


def test_submit_creates_the_planned_job_in_the_node_group(api: FakeLepton) -> None:
    request = lepton_backend().BACKEND.plan(spec_of())
    api.answer(
        "GET", "/dedicated-node-groups", node_groups(**{"a100": "ng-1", "h100-pool": "ng-2"})
    )
    answer = lepton_job(CREATED_ID, "Starting")
    api.answer("POST", "/jobs", answer)
    assert submit(request) == CREATED_ID
    listed, created = api.calls
    assert (listed.method, listed.path) == ("GET", "/dedicated-node-groups")
    assert (created.method, created.path) == ("POST", "/jobs")
    assert created.headers["Authorization"] == f"Bearer {TOKEN}"
    sent = created.body
    planned_job = json.loads(request.job_spec)
    planned_job["spec"]["affinity"] = {"allowed_dedicated_node_groups": ["ng-2"]}  # the id
    # Every job a name of its own: '-' and five hex digits after the spec's.
    name = sent["metadata"]["id"]
    assert re.fullmatch(r"grpo-2node-[0-9a-f]{5}", name)
    planned_job["metadata"]["id"] = name
    assert sent == planned_job  # field for field what plan showed, the node group by its id
    assert sent["spec"]["container"]["command"][2] == lepton_backend().run_command(request.script)
    for hidden in (SECRET_VALUE, TOKEN):
        assert hidden.encode() not in created.raw


def test_submit_refuses_a_node_group_the_workspace_lacks(api: FakeLepton) -> None:
    request = lepton_backend().BACKEND.plan(spec_of())
    api.answer("GET", "/dedicated-node-groups", node_groups(a100="ng-1"))
    with pytest.raises(ConfigError) as refused:
        submit(request)
    assert refused.value.message == (
        "lepton.node_group: no node group 'h100-pool' in Lepton workspace ws1 (it has: a100)"
    )
    assert not api.sent("POST")


@pytest.mark.parametrize(
    ("status", "error", "line"),
    [
        (
            409,
            SchedulerError,
            "Lepton: creating job grpo-2node-0a1b2 failed (HTTP 409: job grpo-2node already "
            "exists)",
        ),
        (
            503,
            UnconfirmedSubmitError,
            "Lepton: creating job grpo-2node-0a1b2 may have worked (HTTP 503: job grpo-2node "
            "already exists): see `lep job list` before submitting again",
        ),
    ],
)
def test_submit_reports_the_apis_refusal_on_one_line(
    api: FakeLepton,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    error: type[SchedulerError],
    line: str,
) -> None:
    request = lepton_backend().BACKEND.plan(spec_of())
    api.answer("GET", "/dedicated-node-groups", node_groups(**{"h100-pool": "ng-2"}))
    message = {"code": "conflict", "message": "job grpo-2node\n already exists"}
    api.answer("POST", "/jobs", message, status=status)
    monkeypatch.setattr(lepton_backend(), "unique_name", lambda name: f"{name}-0a1b2")
    with pytest.raises(error) as refused:
        submit(request)
    assert type(refused.value) is error
    assert refused.value.message == line
    assert refused.value.exit_code == ExitCode.SCHEDULER


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return int(closed.getsockname()[1])


@pytest.mark.usefixtures("api")
def test_submit_to_an_api_that_is_not_there_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    request = lepton_backend().BACKEND.plan(spec_of())
    monkeypatch.setenv("LEPTON_WORKSPACE_URL", f"http://127.0.0.1:{_closed_port()}{BASE}")
    with pytest.raises(SchedulerError) as refused:
        submit(request)
    assert type(refused.value) is SchedulerError
    assert refused.value.message.startswith(
        "Lepton: listing the workspace's node groups failed (ConnectionError: "
    )


def _refused(status: int) -> Exception:
    import requests

    response = requests.Response()
    response.status_code = status
    error = RuntimeError(f"HTTP {status}")
    error.response = response  # type: ignore[attr-defined]  # as the SDK's ClientError has
    return error


def _connection_refused() -> Exception:
    import requests

    try:
        requests.get(f"http://127.0.0.1:{_closed_port()}/", timeout=5)
    except requests.ConnectionError as exc:
        return exc
    raise AssertionError("a closed port answered")


@pytest.mark.usefixtures("sdk")
@pytest.mark.parametrize(
    ("error", "nothing_sent"),
    [
        (_connection_refused, True),
        (lambda: _refused(409), True),
        (lambda: _refused(502), False),  # a gateway's answer: the API may have made the job
        (lambda: __import__("requests").ConnectTimeout("connect timed out"), True),
        (lambda: __import__("requests").ReadTimeout("no answer"), False),
        (lambda: __import__("requests").ConnectionError("connection reset"), False),
    ],
)
def test_what_counts_as_nothing_sent(error: Any, nothing_sent: bool) -> None:
    assert lepton_backend().nothing_sent(error()) is nothing_sent


# ---- Credentials ----


@pytest.mark.usefixtures("sdk")
def test_no_workspace_is_one_line() -> None:
    with pytest.raises(SchedulerError) as refused:
        lepton_backend().credentials({})
    assert refused.value.message == (
        "no Lepton workspace: run `lep login` or set LEPTON_WORKSPACE_ID and LEPTON_WORKSPACE_TOKEN"
    )


@pytest.mark.usefixtures("sdk")
def test_a_workspace_without_a_token_is_one_line() -> None:
    # The SDK itself raises TypeError ('NoneType' object is not subscriptable) for this.
    with pytest.raises(SchedulerError) as refused:
        lepton_backend().credentials({"LEPTON_WORKSPACE_ID": "ws9"})
    assert refused.value.message == (
        "Lepton workspace ws9 has no token: set LEPTON_WORKSPACE_TOKEN, or run "
        "`lep login -c ws9:<token>`"
    )


def test_credentials_come_from_the_environment_or_lep_login(sdk: Any) -> None:
    credentials = lepton_backend().credentials
    assert credentials({"LEPTON_WORKSPACE_ID": "ws9:tok"}) == ("ws9", "tok")
    both = {"LEPTON_WORKSPACE_ID": "ws9", "LEPTON_WORKSPACE_TOKEN": "tok"}
    assert credentials(both) == ("ws9", "tok")
    sdk.WORKSPACE_FILE.parent.mkdir(parents=True)
    sdk.WORKSPACE_FILE.write_text(
        "current_workspace: saved\n"
        "workspaces:\n  saved: {id: saved, url: 'https://x.invalid', auth_token: saved-tok}\n"
    )
    sdk.reload()
    assert credentials({}) == ("saved", "saved-tok")


@pytest.mark.usefixtures("sdk")
def test_submit_without_a_workspace_through_the_cli(
    cli: Cli, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = isolated / "state"
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(state))
    (isolated / "job.yaml").write_text(json.dumps({k: v for k, v in JOB.items() if k != "driver"}))
    result = cli("submit", "-f", "job.yaml", "--", "uv", "run", "examples/run_grpo.py")
    assert result.code == ExitCode.SCHEDULER
    errors = [line for line in result.err.splitlines() if "error:" in line]
    assert errors == [
        "nrl-launch: error: no Lepton workspace: run `lep login` or set LEPTON_WORKSPACE_ID "
        "and LEPTON_WORKSPACE_TOKEN"
    ]
    assert result.out == ""
    left = [p for p in state.rglob("*") if p.is_file()] if state.exists() else []
    assert left == []  # no record, no script


# ---- describe, cancel, head node, logs ----


@pytest.mark.parametrize(
    ("state", "counts", "word", "phase"),
    [
        ("Queueing", {}, "PENDING", Phase.PENDING),
        ("Awaiting", {}, "PENDING", Phase.PENDING),
        ("Starting", {}, "CONFIGURING", Phase.STARTING),
        ("Running", {"ready": 1, "active": 2}, "CONFIGURING", Phase.STARTING),
        ("Running", {"ready": 2, "active": 2}, "RUNNING", Phase.RUNNING),
        ("Restarting", {}, "REQUEUED", Phase.PENDING),
        ("PendingRetry", {}, "REQUEUED", Phase.PENDING),
        ("Stopping", {}, "COMPLETING", Phase.RUNNING),
        ("Terminating", {}, "COMPLETING", Phase.RUNNING),
        ("Completed", {"succeeded": 2}, "COMPLETED", Phase.COMPLETED),
        ("Failed", {"failed": 1}, "FAILED", Phase.FAILED),
        ("Stopped", {}, "CANCELLED", Phase.CANCELLED),
        ("Deleting", {}, "CANCELLED", Phase.CANCELLED),
        ("Deleted", {}, "CANCELLED", Phase.CANCELLED),
        ("Archived", {"succeeded": 2}, "COMPLETED", Phase.COMPLETED),
        ("Archived", {"failed": 1, "succeeded": 1}, "FAILED", Phase.FAILED),
        ("Archived", {}, "CANCELLED", Phase.CANCELLED),
        ("UNK", {}, "UNKNOWN", Phase.UNKNOWN),
        ("SomethingNew", {}, "UNKNOWN", Phase.UNKNOWN),
        (None, {}, "PENDING", Phase.PENDING),
    ],
)
@pytest.mark.usefixtures("sdk")
def test_lepton_states_in_slurms_words(
    state: str | None, counts: dict[str, int], word: str, phase: Phase
) -> None:
    from leptonai.api.v2.types.job import LeptonJob

    view = lepton_backend().job_view(LeptonJob.model_validate(lepton_job("j", state, **counts)))
    assert (view.state, state_phase(view.state)) == (word, phase)
    assert view.reason is None or "\n" not in view.reason


def test_describe_asks_for_each_job(api: FakeLepton) -> None:
    api.answer("GET", "/jobs/a-1", lepton_job("a-1", "Failed", ready=1, active=1, failed=1))
    views = lepton_backend().BACKEND.describe([Ref("a-1"), Ref("gone-2")])
    assert list(views) == ["a-1"]  # the API no longer knows gone-2
    assert views["a-1"].state == "FAILED"
    assert views["a-1"].reason == "1 of 2 workers ready, 1 failed"
    assert [(c.method, c.path, c.query) for c in api.calls] == [
        ("GET", "/jobs/a-1", {"job_query_mode": ["alive_and_archive"]}),
        ("GET", "/jobs/gone-2", {"job_query_mode": ["alive_and_archive"]}),
    ]


def test_describe_reports_an_api_failure_as_a_scheduler_error(api: FakeLepton) -> None:
    api.answer("GET", "/jobs/a-1", {"message": "token expired"}, status=401)
    with pytest.raises(SchedulerError) as failed:
        lepton_backend().BACKEND.describe([Ref("a-1")])
    assert failed.value.message == "Lepton: asking about job a-1 failed (HTTP 401: token expired)"


def test_cancel_stops_running_jobs_and_keeps_them(api: FakeLepton) -> None:
    api.answer("GET", "/jobs/run-1", lepton_job("run-1", "Running", ready=2, active=2))
    api.answer("GET", "/jobs/done-2", lepton_job("done-2", "Completed", succeeded=2))
    api.answer("PATCH", "/jobs/run-1", {})
    ended = lepton_backend().BACKEND.cancel([Ref("run-1"), Ref("done-2"), Ref("gone-3")])
    assert ended == ["done-2", "gone-3"]
    (stop,) = api.sent("PATCH")
    assert (stop.path, stop.body) == ("/jobs/run-1", {"spec": {"stopped": True}})
    assert not api.sent("DELETE")


def test_head_node_is_worker_zero_by_name(api: FakeLepton) -> None:
    backend = lepton_backend().BACKEND
    api.answer("GET", "/jobs/j-1/replicas", replicas("j-1-1-bbbbb", "j-1-0-aaaaa"))
    assert backend.head_node(Ref("j-1")) == "j-1-0.j-1-job-svc"
    assert backend.dashboard_host(Ref("j-1"), "j-1-0.j-1-job-svc") == "j-1-0.j-1-job-svc"
    api.answer("GET", "/jobs/j-1/replicas", [])
    with pytest.raises(JobNotRunningError, match="no worker 0 for job j-1"):
        backend.head_node(Ref("j-1"))


def test_replica_log_reads_one_workers_log(api: FakeLepton) -> None:
    api.answer("GET", "/jobs/j-1", lepton_job("j-1", "Running", ready=2, active=2))
    api.answer("GET", "/jobs/j-1/replicas", replicas("j-1-0-aaaaa", "j-1-1-bbbbb"))
    streams = [
        {"stream": {"replica": "j-1-1-bbbbb"}, "values": [["300", "third"], ["100", "first\n"]]},
        {"stream": {"replica": "j-1-1-bbbbb"}, "values": [["200", "second"]]},
    ]
    api.answer("GET", "/logs", {"data": {"result": streams}})
    assert lepton_backend().BACKEND.replica_log("j-1", 1) == "first\nsecond\nthird\n"
    (read,) = [c for c in api.calls if c.path == "/logs"]
    assert read.query["job"] == ["j-1"] and read.query["replica"] == ["j-1-1-bbbbb"]
    assert read.query["start"] == [str((1_700_000_000_000 - 60_000) * 1_000_000)]
    assert read.query["direction"] == ["backward"] and read.query["limit"] == ["5000"]
    with pytest.raises(JobNotFoundError, match="no worker 2 of job j-1"):
        lepton_backend().BACKEND.replica_log("j-1", 2)


@pytest.mark.usefixtures("sdk")
def test_what_lepton_has_no_word_for() -> None:
    backend = lepton_backend().BACKEND
    assert (backend.name, backend.slurm_cluster) == ("lepton", False)
    assert (backend.shares_files, backend.secrets_from_shell) == (False, False)
    assert backend.new_job_id() == ""
    assert backend.batch_output("j-1") == "j-1.out"
    with pytest.raises(UsageError, match="--chain"):
        backend.check_chain(spec_of())
    with pytest.raises(UsageError, match="Ray jobs only"):
        backend.plan_plain(spec_of())


@pytest.mark.usefixtures("sdk")
def test_the_example_renders_as_seed_004_sets_it_up(cli: Cli, tmp_path: Path) -> None:
    """examples/lepton/grpo-4node.yaml is what users copy: it renders with no warning, its job
    is seed 004's (4 workers of one A100, the NFS volume at /mnt, NGC registry auth)."""
    from tests.conftest import EXAMPLES

    script = tmp_path / "job.sh"
    result = cli("render", "-f", str(EXAMPLES / "lepton" / "grpo-4node.yaml"), "-o", str(script))
    assert result.code == 0 and "warning" not in result.err, result.err
    spec = json.loads(result.out)["spec"]
    assert (spec["completions"], spec["parallelism"]) == (4, 4)
    assert spec["resource_shape"] == "gpu.a100-80gb"
    assert spec["image_pull_secrets"] == ["ngc-registry"]
    assert spec["mounts"] == [
        {"from": "node-nfs:az-files-nfs-vol", "path": "/", "mount_path": "/mnt"}
    ]
    assert {"name": "NCCL_IGNORE_CPU_AFFINITY", "value": "1"} in spec["envs"]
    assert spec["container"]["command"][2] == lepton_backend().run_command(script.read_text())
    assert shellcheck(script).returncode == 0, shellcheck(script).stdout


@pytest.mark.usefixtures("sdk")
def test_doctor_leaves_lepton_s_storage_to_lepton(cli: Cli) -> None:
    """The log dir and image of a Lepton job are on Lepton's side: doctor does not judge them
    by this machine's files (no 'pyxis', no '/mnt ... writable' verdict)."""
    from tests.conftest import EXAMPLES

    result = cli("doctor", "-f", str(EXAMPLES / "lepton" / "grpo-4node.yaml"))
    assert result.code == 0, result.err
    assert "pulled by pyxis" not in result.out and "writable" not in result.out
    assert "warn  logs.base_dir: /mnt/nrl-logs and the image are on lepton's side" in result.out


# ---- The CLI, end to end against the fake API ----


def test_a_lepton_job_through_the_cli(
    cli: Cli, api: FakeLepton, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """submit records the job Lepton created; status, logs and cancel ask Lepton about it;
    what needs this machine to reach the workers (attach, logs -f) says so on one line."""
    monkeypatch.setenv("NRL_LAUNCH_STATE_DIR", str(isolated / "state"))
    (isolated / "job.yaml").write_text(json.dumps(JOB))
    api.answer("GET", "/dedicated-node-groups", node_groups(**{"h100-pool": "ng-2"}))
    api.answer("POST", "/jobs", lepton_job(CREATED_ID, "Starting"))
    result = cli("submit", "-f", "job.yaml")
    assert result.code == 0, result.err
    assert CREATED_ID in result.out
    (created,) = api.sent("POST")
    assert SECRET_VALUE.encode() not in created.raw

    api.answer("GET", f"/jobs/{CREATED_ID}", lepton_job(CREATED_ID, "Running", ready=2, active=2))
    result = cli("status", CREATED_ID, "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["jobs"][0]["slurm_state"] == "RUNNING"

    api.answer("GET", f"/jobs/{CREATED_ID}/replicas", replicas(f"{CREATED_ID}-0-aaaaa"))
    stream = {"stream": {}, "values": [["100", "[nrl] ray head up"], ["200", "[nrl] step 1"]]}
    api.answer("GET", "/logs", {"data": {"result": [stream]}})
    result = cli("logs", CREATED_ID, "--tail", "1")
    assert (result.code, result.out) == (0, "[nrl] step 1\n"), result.err

    for args, word in (
        (("logs", "-f", CREATED_ID), "--follow"),
        (("attach", CREATED_ID, "--", "ray", "status"), "network this machine is not in"),
        (("dashboard", CREATED_ID), "network this machine is not in"),
    ):
        result = cli(*args)
        assert result.code == ExitCode.BAD_INPUT, result.err
        (line,) = result.err.splitlines()
        assert line.startswith("nrl-launch: error: ") and word in line

    api.answer("PATCH", f"/jobs/{CREATED_ID}", {})
    result = cli("cancel", CREATED_ID)
    assert result.code == 0, result.err
    (stop,) = api.sent("PATCH")
    assert stop.body == {"spec": {"stopped": True}}


# ---- The CLI stays fast ----


@pytest.mark.usefixtures("sdk")
def test_only_the_lepton_backend_imports_the_sdk(isolated: Path) -> None:
    from tests.conftest import EXAMPLES

    rendered = imported("render", "--backend", "slurm", "-f", str(EXAMPLES / "grpo-2node.yaml"))
    assert "nrl_launch.backends.slurm" in rendered
    assert "leptonai" not in roots(rendered)
    assert "leptonai" not in roots(imported("--help"))
    (isolated / "job.yaml").write_text(json.dumps(JOB))
    assert "leptonai" in roots(imported("render", "-f", str(isolated / "job.yaml")))
