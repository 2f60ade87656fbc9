"""Container image references as `enroot import` takes them. Pure.

enroot's form is `docker://[USER@][REGISTRY#]IMAGE[:TAG]` (enroot's doc/cmd/import.md): the
registry is separated by `#`, not `/`. Only recent enroot versions also read Docker's own
`REGISTRY/IMAGE`; older ones take `nvcr.io/nvidia/x` for an image on Docker Hub. So every
reference is written in enroot's form: `nvcr.io/nvidia/nemo-rl:v0.6.0` becomes
`docker://nvcr.io#nvidia/nemo-rl:v0.6.0`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["EXAMPLE", "Image", "parse"]

EXAMPLE = "nvcr.io/nvidia/nemo-rl:v0.6.0 or docker://nvcr.io#nvidia/nemo-rl:v0.6.0"

# Docker's reference grammar (distribution/reference): lowercase path components, a tag of up
# to 128 word characters, dots and dashes, a sha256 digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
_REGISTRY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?")
# enroot matches the user against the login of a `machine` line in its .credentials file
# (netrc); NGC's is `$oauthtoken`.
_USER = re.compile(r"[A-Za-z0-9_.~$-]+")


@dataclass(frozen=True)
class Image:
    """One registry image: `registry` None is Docker Hub."""

    path: str
    registry: str | None = None
    tag: str | None = None
    digest: str | None = None
    user: str | None = None

    @property
    def uri(self) -> str:
        """The reference in enroot's form, for `enroot import`."""
        user = f"{self.user}@" if self.user else ""
        registry = f"{self.registry}#" if self.registry else ""
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"docker://{user}{registry}{self.path}{tag}{digest}"

    @property
    def file_name(self) -> str:
        """The .sqsh file name a pull writes by default: nemo-rl+v0.6.0.sqsh (enroot's own
        default joins the whole path with '+'; the last component is enough to recognise)."""
        name = self.path.rsplit("/", 1)[-1]
        if self.tag:
            name += f"+{self.tag}"
        elif self.digest:
            name += f"+{self.digest.removeprefix('sha256:')[:12]}"
        return f"{name}.sqsh"


def _looks_like_registry(component: str) -> bool:
    # Docker's rule: the first component names a registry when it has a dot or a port, or is
    # localhost; otherwise it is a namespace on Docker Hub (library/ubuntu, nvidia/cuda).
    return "." in component or ":" in component or component == "localhost"


def parse(reference: str) -> Image:
    """Read a registry image reference, Docker's form or enroot's `docker://` one.

    Raises:
        ValueError: one line saying what is wrong with `reference`.
    """
    text = reference.strip()
    if not text:
        raise ValueError("must not be empty")
    if text.endswith(".sqsh") or text.startswith(("/", "./", "../", "~")):
        raise ValueError(
            "is a file, not a registry image: a .sqsh image needs no pull (use it as --container)"
        )
    scheme, sep, rest = text.partition("://")
    if sep and scheme != "docker":
        raise ValueError(
            f"{scheme}:// images cannot be pulled here: only registry (docker://) ones"
        )
    if not sep:
        rest = text
    user = None
    at = rest.find("@")
    # enroot's USER@ comes first (pyxis takes USER@REGISTRY#IMAGE without docker:// too); any
    # other @ starts a digest.
    if (sep or "#" in rest) and at >= 0 and not rest[at + 1 :].startswith("sha256:"):
        user, rest = rest[:at], rest[at + 1 :]
        if not _USER.fullmatch(user):
            raise ValueError(f"user {user!r} holds characters enroot does not accept")
    rest, digest = _split_digest(rest)
    registry, path = _split_registry(rest)
    path, tag = _split_tag(path)
    if registry is not None and not _REGISTRY.fullmatch(registry):
        raise ValueError(f"registry {registry!r} is not a host name with an optional :port")
    if not _PATH.fullmatch(path):
        raise ValueError(
            f"image name {path!r} must be lowercase letters, digits and . _ - separated by /"
        )
    if tag is not None and not _TAG.fullmatch(tag):
        raise ValueError(f"tag {tag!r} must be letters, digits, _ . and - (128 at most)")
    return Image(path=path, registry=registry, tag=tag, digest=digest, user=user)


_DIGEST_AT_END = re.compile(r"@sha256:[^@]*$")


def _split_digest(text: str) -> tuple[str, str | None]:
    match = _DIGEST_AT_END.search(text)
    if not match:
        return text, None
    digest = match[0][1:]
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"digest {digest!r} must be sha256: and 64 hex digits")
    return text[: match.start()], digest


def _split_registry(text: str) -> tuple[str | None, str]:
    if "#" in text:
        registry, _, path = text.partition("#")
        return registry, path
    first, slash, rest = text.partition("/")
    if slash and _looks_like_registry(first):
        return first, rest
    return None, text


def _split_tag(path: str) -> tuple[str, str | None]:
    # A colon after the last slash starts the tag (one before it belongs to a registry port).
    head, slash, last = path.rpartition("/")
    name, colon, tag = last.partition(":")
    return f"{head}{slash}{name}", (tag if colon else None)
