"""Files: what a write made, a directory's entries, an edit's result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List

from ._json import Json


@dataclass
class WriteInfo:
    """The reply to a file upload."""

    path: str
    """Where the file is."""
    mode: str
    """Its mode, e.g. ``"0644"``."""
    size: int
    """Bytes written."""

    @classmethod
    def from_json(cls, j: Json) -> "WriteInfo":
        """Parses the upload reply."""
        return cls(
            path=str(j.get("path", "")),
            mode=str(j.get("mode", "")),
            size=int(j["size"]),
        )


@dataclass
class EntryInfo:
    """One directory entry."""

    name: str
    """Its name (no directory part)."""
    type: str
    """``"file"``, ``"dir"``, ``"symlink"``, ..."""
    size: int
    """Size in bytes."""
    mode: str
    """Permission bits, e.g. ``"0644"``."""
    mtime: str
    """Modification time as the API states it."""
    path: str = ""
    """Its absolute path (the listed directory and ``name``)."""

    @classmethod
    def from_json(cls, j: Json, directory: str = "") -> "EntryInfo":
        """Parses one ``entries`` item of a listing of ``directory``."""
        name = str(j.get("name", ""))
        return cls(
            name=name,
            type=str(j.get("type", "")),
            size=int(j.get("size", 0)),
            mode=str(j.get("mode", "")),
            mtime=str(j.get("mtime", "")),
            path=(directory.rstrip("/") + "/" + name) if directory else name,
        )


@dataclass
class DirListing:
    """A directory listing: iterate it like the list of its entries."""

    path: str
    """The directory."""
    entries: List[EntryInfo]
    """Its entries, in the server's order."""
    truncated: bool = False
    """True when the listing stopped at ``limit`` entries (or 30 s)."""

    def __iter__(self) -> Iterator[EntryInfo]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> List[str]:
        """The entries' names."""
        return [e.name for e in self.entries]

    @classmethod
    def from_json(cls, j: Json) -> "DirListing":
        """Parses the ``list=true`` reply."""
        path = str(j.get("path", ""))
        return cls(
            path=path,
            entries=[EntryInfo.from_json(e, path) for e in j.get("entries", [])],
            truncated=bool(j.get("truncated", False)),
        )


@dataclass
class EditResult:
    """The reply to ``files/edit``."""

    path: str
    """The edited file."""
    replaced: int
    """How many occurrences were replaced."""
    size: int
    """The file's new size."""
    crlf: bool
    """True when the file has CRLF line ends (the new text was written with them)."""
    diff: str
    """A unified diff of the change (cut at 4 KiB)."""

    @classmethod
    def from_json(cls, j: Json) -> "EditResult":
        """Parses the edit reply."""
        return cls(
            path=str(j.get("path", "")),
            replaced=int(j.get("replaced", 0)),
            size=int(j.get("size", 0)),
            crlf=bool(j.get("crlf", False)),
            diff=str(j.get("diff", "")),
        )
