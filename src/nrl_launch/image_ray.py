"""Which Ray a container image holds, known before the job queues: token authentication (the
default, ray.auth token) needs Ray 2.52, and the head refuses an older one only once the job has
waited in the queue and started.

- A `.sqsh` file: its file listing (`unsquashfs -l`, which reads the directory table, not the
  files) names the installed package, `.../site-packages/ray-X.Y.Z.dist-info`.
- A registry image of NeMo RL (`nvcr.io/nvidia/nemo-rl:v0.4.0`): the Ray its release pins.
- A `.sqsh` file that cannot be listed here (render, or no unsquashfs) but whose name names a
  NeMo RL release (`nemo-rl.v0.4.0.sqsh`, `nvidia+nemo-rl+v0.4.0.sqsh` as enroot and
  `nrl-launch pull` name them): the Ray that release pins.
- Anything else cannot be known here, and is said so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AUTH_RAY", "ImageRay", "image_ray", "ray_in_listing"]

# The first Ray with token authentication.
AUTH_RAY = (2, 52)

# The Ray each NeMo RL release pins (its pyproject.toml), by release.
_NEMO_RL_RAY = {(0, 4): "2.46.0", (0, 5): "2.49.2", (0, 6): "2.54.0", (0, 7): "2.55.1"}
# NeMo RL's images on NGC (nvcr.io/nvidia/nemo-rl:v0.6.0, and variants: v0.4.0.nemotron_3_nano).
_NEMO_RL_TAG = re.compile(r"(?:^|[/#])nemo-rl:v(\d+)\.(\d+)\.\d+(?:[.\w-]*)$")
# A .sqsh file named after a NeMo RL release: nemo-rl.v0.4.0.sqsh, nemo-rl+v0.6.0.sqsh (pull's
# name), nvidia+nemo-rl+v0.4.0.sqsh (enroot import's), nemo_rl-v0.4.0.nemotron_3_nano.sqsh.
_NEMO_RL_FILE = re.compile(
    r"(?:^|[+._-])nemo[-_]rl[+._:-]v?(\d+)\.(\d+)\.\d+(?:[.\w+-]*)\.(?:sqsh|squashfs)$", re.I
)
# pip's site-packages, or a Debian (and NGC) system Python's dist-packages.
_DIST_INFO = re.compile(
    r"/(?:site|dist)-packages/ray-(\d+\.\d+\.\d+[\w.]*)\.dist-info/?$", re.MULTILINE
)


@dataclass(frozen=True)
class ImageRay:
    """The Ray of an image (None: not known) and how it is known, for the user's line."""

    version: str | None
    how: str

    @property
    def has_auth(self) -> bool | None:
        """Whether that Ray has token authentication; None when the version is not known."""
        if self.version is None:
            return None
        major, minor = (int(p) for p in self.version.split(".")[:2])
        return (major, minor) >= AUTH_RAY


def ray_in_listing(listing: str) -> str | None:
    """The Ray version an image's file listing (`unsquashfs -l`) shows installed, or None."""
    found = _DIST_INFO.findall(listing)
    return max(found, key=_version_key) if found else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def image_ray(image: str, listing: str | None = None) -> ImageRay:
    """What can be known of `image`'s Ray: from `listing` (a .sqsh file's `unsquashfs -l`),
    else from a NeMo RL release tag, or a file's name that names one."""
    if listing is not None:
        version = ray_in_listing(listing)
        how = "its file listing" if version else "its file listing shows no Ray"
        return ImageRay(version, how)
    tag = _NEMO_RL_TAG.search(image)
    named = None if tag else _NEMO_RL_FILE.search(image.rsplit("/", 1)[-1])
    found = tag or named
    if found:
        release = (int(found[1]), int(found[2]))
        said = f"its name says NeMo RL v{release[0]}.{release[1]}" if named else ""
        if release in _NEMO_RL_RAY:
            how = (
                f"{said}, which pins it" if named else f"NeMo RL v{release[0]}.{release[1]} pins it"
            )
            return ImageRay(_NEMO_RL_RAY[release], how)
        said += "; " if named else ""
        if release > max(_NEMO_RL_RAY):
            newest = max(_NEMO_RL_RAY)
            return ImageRay(_NEMO_RL_RAY[newest], f"{said}NeMo RL pins it from v0.7 on, or later")
        if release < min(_NEMO_RL_RAY):
            oldest = min(_NEMO_RL_RAY)
            return ImageRay(_NEMO_RL_RAY[oldest], f"{said}NeMo RL before v0.4 pins it, or older")
    return ImageRay(None, "not a NeMo RL release image, nor a .sqsh file readable here")
