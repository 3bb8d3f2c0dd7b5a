"""A local stand-in for the Hugging Face Hub's HTTP API: enough of it for ``snapshot_download``
(repository info with its file list, then each file by HEAD and GET), served from folders on disk
on 127.0.0.1. Requests it does not know get 404 and are recorded."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["serve_hub"]


def _sha(repo: str) -> str:
    """A commit id of its own for each repository, as the hub's are."""
    return hashlib.sha1(repo.encode()).hexdigest()


def _handler(repos: dict[str, Path], log: list[str]) -> type[BaseHTTPRequestHandler]:
    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, *, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            log.append(f"{self.command} {path}")
            for repo, root in repos.items():
                files = sorted(
                    p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                )
                if path.startswith(f"/api/models/{repo}/revision/"):
                    siblings = [{"rfilename": f} for f in files]
                    info = {"id": repo, "sha": _sha(repo), "siblings": siblings}
                    return self._send(
                        json.dumps(info).encode(), "application/json", body, _sha(repo)
                    )
                if path.startswith(f"/api/models/{repo}/tree/"):
                    tree = [_entry(root, f) for f in files]
                    data = json.dumps(tree).encode()
                    return self._send(data, "application/json", body, _sha(repo))
                prefix = f"/{repo}/resolve/"
                if path.startswith(prefix):
                    name = path[len(prefix) :].partition("/")[2]
                    file = root / name
                    if file.is_file():
                        data = file.read_bytes()
                        return self._send(data, "application/octet-stream", body, _sha(repo))
            self._send(b'{"error": "not found"}', "application/json", body, "", status=404)

        def _send(self, data: bytes, ctype: str, body: bool, sha: str, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            if sha:
                self.send_header("X-Repo-Commit", sha)
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Hub


def _entry(root: Path, name: str) -> dict[str, object]:
    data = (root / name).read_bytes()
    oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id
    return {"type": "file", "path": name, "size": len(data), "oid": oid}


@contextmanager
def serve_hub(repos: dict[str, Path]) -> Iterator[tuple[str, list[str]]]:
    """(endpoint URL, request log) of a stand-in hub serving ``repos`` (name -> folder)."""
    log: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(repos, log))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()
