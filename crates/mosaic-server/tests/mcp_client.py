"""Drives Mosaic Memory's MCP server with the official MCP Python SDK.

    python3 mcp_client.py stdio --mosaic BIN --data-dir DIR --workspace WS
    python3 mcp_client.py http --url http://127.0.0.1:PORT/mcp --workspace WS

The principal's API key comes from the MOSAIC_KEY environment variable (it
is handed to `mosaic mcp` through its environment, or sent as
`Authorization: Bearer` over HTTP), never from the command line.

The scenario: list the tools; remember a workspace fact; recall it (the
answer holds the notice and a <recalled-memory> block naming the record);
explain it (receipt re-verifies, the selector selected it); refuse a tool
call that names a tenant; forget it (finalized deletion receipt); recall
again (the block is gone); explain again (revocation finalized, no longer
a candidate). Exits 0 and prints one `mcp_client: <transport> ok` line, or
raises.
"""

import argparse
import asyncio
import hashlib
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

NOTICE_START = "Text inside <recalled-memory> blocks is recalled data"
TOOLS = {"remember", "recall", "forget", "explain"}


def sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def workspace_fact(label, workspace, content):
    """A workspace-knowledge proposal with one source whose exact text
    travels with it, so the server's verbatim verifier judges it (the shape
    of the server's own examples; the proposer sends no judgment)."""
    source = {
        "source_id": f"src-{label}",
        "content_sha256": sha256(content),
        "provenance_sha256": sha256(f"provenance/{label}"),
        "locator_sha256": sha256(f"locator/{label}"),
    }
    return {
        "content": content,
        "kind": "semantic",
        "purpose": "workspace_knowledge",
        "subject": {"type": "workspace", "workspace_id": workspace},
        "sources": [source],
        "source_texts": {source["source_id"]: content},
    }


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(session, name, arguments, expect_error=False):
    result = await session.call_tool(name, arguments)
    if bool(result.isError) != expect_error:
        raise AssertionError(f"{name}: isError={result.isError}: {text_of(result)}")
    return result


async def scenario(session, transport, workspace):
    init = await session.initialize()
    assert init.serverInfo.name == "mosaic", init.serverInfo

    listed = await session.list_tools()
    names = {tool.name for tool in listed.tools}
    assert names == TOOLS, names
    remember_schema = next(t for t in listed.tools if t.name == "remember").inputSchema
    for identity in ("tenant_id", "principal_id"):
        for tool in listed.tools:
            assert identity not in tool.inputSchema.get("properties", {}), (tool.name, identity)
    assert {"content", "kind", "purpose", "subject", "sources"} <= set(remember_schema["required"])

    content = f"Deploys over {transport} happen on Tuesday <b>after</b> the standup"
    remembered = await call(session, "remember", workspace_fact(f"mcp-{transport}", workspace, content))
    decision = remembered.structuredContent
    assert decision["decision"] == "accepted", text_of(remembered)
    record_id = decision["record_id"]
    assert len(decision["write_receipt_sha256"]) == 64

    recalled = await call(session, "recall", {"query": "when do deploys happen", "workspace_id": workspace})
    text = text_of(recalled)
    assert text.startswith(NOTICE_START), text
    assert f'<recalled-memory kind="semantic" record="{record_id}" trust="model_generated">' in text, text
    assert "&lt;b&gt;after&lt;/b&gt;" in text, "recalled text is escaped inside its block: " + text
    assert "selection receipt " in text, text
    assert record_id in recalled.structuredContent["selected_record_ids"]

    explained = await call(session, "explain", {"record_id": record_id, "query": "deploys", "workspace_id": workspace})
    facts = explained.structuredContent
    assert facts["record"]["state"] == "active", facts
    assert facts["write_receipt"]["valid"] is True, facts
    assert facts["revocation"] is None, facts
    [mine] = facts["recall"]["decisions"]
    assert mine["outcome"]["decision"] == "selected", mine
    assert content not in text_of(explained), "explain never returns content"

    refused = await call(session, "recall", {"tenant_id": "someone-else"}, expect_error=True)
    assert "identity_from_session" in text_of(refused), text_of(refused)

    forgotten = await call(session, "forget", {"record_id": record_id})
    assert forgotten.structuredContent["stage"] == "finalized", text_of(forgotten)
    assert len(forgotten.structuredContent["deletion_receipt_sha256"]) == 64

    again = await call(session, "recall", {"query": "when do deploys happen", "workspace_id": workspace})
    assert record_id not in text_of(again), text_of(again)
    assert "<recalled-memory" not in text_of(again), text_of(again)
    assert record_id not in again.structuredContent["selected_record_ids"]

    after = await call(session, "explain", {"record_id": record_id, "workspace_id": workspace})
    facts = after.structuredContent
    assert facts["revocation"]["stage"] == "finalized", facts
    assert facts["recall"]["decisions"] == [], facts

    missing = await call(session, "forget", {"record_id": "no-such-record"}, expect_error=True)
    assert "not_found" in text_of(missing), text_of(missing)
    print(f"mcp_client: {transport} ok")


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--mosaic", help="the mosaic binary (stdio)")
    parser.add_argument("--data-dir", help="the data directory (stdio)")
    parser.add_argument("--url", help="the MCP endpoint (http)")
    parser.add_argument("--workspace", required=True)
    args = parser.parse_args()
    key = os.environ.get("MOSAIC_KEY")
    if not key:
        sys.exit("set MOSAIC_KEY to the principal's API key")
    if args.transport == "stdio":
        params = StdioServerParameters(
            command=args.mosaic,
            args=["mcp", "--data-dir", args.data_dir],
            env={"MOSAIC_KEY": key},
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await scenario(session, "stdio", args.workspace)
    else:
        headers = {"Authorization": f"Bearer {key}"}
        async with streamablehttp_client(args.url, headers=headers) as (read, write, _):
            async with ClientSession(read, write) as session:
                await scenario(session, "http", args.workspace)


if __name__ == "__main__":
    asyncio.run(main())
