"""DGX Cloud Lepton's SDK and workspace: the credentials, the client, and its errors read as
nrl-launch's (`lepton` is the backend). The SDK is imported only inside the functions that need
it (`pip install 'nrl-launch[lepton]'`): no import path of the CLI loads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from nrl_launch.errors import (
    SchedulerError,
    UsageError,
)

if TYPE_CHECKING:
    from leptonai.api.v2.client import APIClient

__all__ = [
    "INSTALL_HINT",
    "NO_WORKSPACE",
    "credentials",
    "error_detail",
    "failed",
    "nothing_sent",
    "require_sdk",
    "status_code",
    "workspace_client",
]

INSTALL_HINT = "backend lepton needs the leptonai SDK: pip install 'nrl-launch[lepton]'"
NO_WORKSPACE = (
    "no Lepton workspace: run `lep login` or set LEPTON_WORKSPACE_ID and LEPTON_WORKSPACE_TOKEN"
)
# An API error's message, shown on one line, is cut here (a proxy may answer with a page).
_DETAIL_CHARS = 300


# ---- The SDK and the workspace ----


def require_sdk() -> None:
    """Import the SDK's client (and with it every model), or say how to install it."""
    try:
        import leptonai.api.v2.client  # noqa: F401  # the import itself is the check
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def credentials(environ: Mapping[str, str]) -> tuple[str, str]:
    """The workspace id and token the SDK's client would take (its own order: the environment,
    then what `lep login` saved), or one line saying what is missing. The SDK itself answers a
    missing workspace with a paragraph, and an id without a token with a TypeError.

    Raises:
        SchedulerError: no workspace, or no token for it. Like a missing sbatch, the scheduler
            cannot be reached from here (exit 3), and `launch` removes what it wrote.
    """
    from leptonai.api.v2.workspace_record import WorkspaceRecord

    workspace = environ.get("LEPTON_WORKSPACE_ID") or None
    if workspace is None:
        current = WorkspaceRecord.current()
        workspace = current.id_ if current else None
    if not workspace:
        raise SchedulerError(NO_WORKSPACE)
    token = None
    if ":" in workspace:  # a credential string, <id>:<token>, as `lep login -c` takes it
        workspace, token = workspace.split(":", 1)
    saved = WorkspaceRecord.get(workspace)
    token = token or environ.get("LEPTON_WORKSPACE_TOKEN") or (saved.auth_token if saved else None)
    if not token:
        raise SchedulerError(
            f"Lepton workspace {workspace} has no token: set LEPTON_WORKSPACE_TOKEN, or run "
            f"`lep login -c {workspace}:<token>`"
        )
    return workspace, token


def workspace_client() -> APIClient:
    require_sdk()
    from leptonai.api.v2.client import APIClient

    workspace, token = credentials(os.environ)
    return APIClient(workspace_id=workspace, auth_token=token)


def error_detail(exc: BaseException) -> str:
    """What went wrong, on one line: the API's own message where it gave one."""
    response = getattr(exc, "response", None)
    if response is not None:
        text = str(response.text or "")
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("message"):
            text = str(body["message"])
        detail = f"HTTP {response.status_code}: {text or response.reason}"
    else:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    detail = " ".join(detail.split())
    return detail if len(detail) <= _DETAIL_CHARS else detail[: _DETAIL_CHARS - 3] + "..."


def status_code(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def failed(exc: BaseException, doing: str) -> SchedulerError:
    return SchedulerError(f"Lepton: {doing} failed ({error_detail(exc)})")


def nothing_sent(exc: BaseException) -> bool:
    """Whether a request failed before it could reach the API: no connection was made (refused,
    no such host, connect timeout, proxy or TLS failure), or the API refused it (4xx)."""
    import requests

    code = status_code(exc)
    if code is not None:
        return code < 500
    if isinstance(exc, (requests.ConnectTimeout, requests.exceptions.ProxyError)):
        return True
    if isinstance(exc, requests.exceptions.SSLError):
        return True
    if isinstance(exc, requests.ConnectionError):
        from urllib3.exceptions import NewConnectionError

        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        return isinstance(reason, NewConnectionError)
    return False
