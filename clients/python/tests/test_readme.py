"""The repository README's first Python block, run as a new user runs it:
after `mosaic quickstart` and the Python snippet quickstart prints, with
the key quickstart made, against a real `mosaic serve`."""

import contextlib
import io
import json
import os
import re
import subprocess

from mosaic_test_server import REPO, mosaic_binary

README_URL = "http://127.0.0.1:7070"


def first_python_block(text: str) -> str:
    found = re.search(r"^```python\n(.*?)^```$", text, re.S | re.M)
    assert found, "README.md has no python block"
    return found.group(1)


def run(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<snippet>", "exec"), {})
    return out.getvalue()


def test_the_readme_block_runs_after_quickstart_and_its_snippet(server):
    made = subprocess.run(
        [
            mosaic_binary(),
            "quickstart",
            "--url",
            server.url,
            "--admin-key",
            server.admin_key,
            "--tenant",
            f"readme-{os.getpid()}",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    data = json.loads(made.stdout)["data"]
    # The snippet quickstart prints adds its own conversation.
    assert "Berlin" in run(data["python"])

    block = first_python_block((REPO / "README.md").read_text())
    assert '"mk_..."' in block and README_URL in block
    block = block.replace('"mk_..."', json.dumps(data["key"])).replace(README_URL, server.url)
    context = run(block)
    fact = re.search(r'add_fact\("([^"]+)"', block)
    assert fact, "the README block adds no fact"
    # The fact the block adds is recalled: the gate accepted it.
    assert 'kind="semantic"' in context and fact.group(1) in context, context
