"""The OpenAPI document of a real `mosaic serve` is valid OpenAPI 3.0, and
a client generated from it with a standard generator
(openapi-python-client) works against the server."""

import importlib
import json
import os
import shutil
import subprocess
import sys

import httpx
import pytest


def _need(module):
    if os.environ.get("CI") == "true":
        return importlib.import_module(module)  # CI installs it: a missing one fails
    return pytest.importorskip(module)


def test_the_document_is_valid_openapi(server):
    validator = _need("openapi_spec_validator")
    doc = httpx.get(f"{server.url}/openapi.json").json()
    validator.validate(doc)
    assert doc["paths"]["/v1/facts"]["post"]["operationId"] == "addFact"


def test_a_generated_client_works_against_the_server(server, principal, tmp_path):
    _need("openapi_python_client")
    generator = shutil.which("openapi-python-client") or os.path.join(os.path.dirname(sys.executable), "openapi-python-client")
    doc_path = tmp_path / "openapi.json"
    doc_path.write_text(httpx.get(f"{server.url}/openapi.json").text)
    out = tmp_path / "gen"
    out.mkdir()
    run = subprocess.run(
        [generator, "generate", "--path", str(doc_path), "--meta", "none", "--output-path", str(out / "mosaic_generated")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    sys.path.insert(0, str(out))
    try:
        pkg = importlib.import_module("mosaic_generated")
        api = importlib.import_module("mosaic_generated.api.default")
        models = importlib.import_module("mosaic_generated.models")
        for name in ("health", "add_messages", "add_fact", "recall", "get_memory", "list_memories", "revoke_memory", "verify_receipt"):
            importlib.import_module(f"mosaic_generated.api.default.{name}")
        client = pkg.AuthenticatedClient(base_url=server.url, token=principal["key"])

        health = api.health.sync(client=client)
        assert isinstance(health, models.HealthResponse) and health.status == "ok"

        ingest = api.add_messages.sync(
            "chat-g",
            client=client,
            body=models.IngestRequest.from_dict({"messages": [{"id": "g1", "role": "user", "content": "I keep bees in the garden."}]}),
        )
        assert isinstance(ingest, models.IngestResponse) and ingest.kept == 1
        fact = api.add_fact.sync(
            client=client,
            body=models.FactRequest.from_dict({"content": "I keep bees", "cites": [{"conversation_id": "chat-g", "message_id": "g1"}]}),
        )
        assert isinstance(fact, models.ProposeResponse) and fact.decision == "accepted"
        found = api.recall.sync(client=client, body=models.RecallRequest.from_dict({"query": "bees", "kinds": ["semantic"]}))
        assert isinstance(found, models.RecallResponse)
        assert found.selected_record_ids == [fact.record_id]
        memory = api.get_memory.sync(fact.record_id, client=client)
        assert isinstance(memory, models.MemoryView) and memory.content == "I keep bees"
        listed = api.list_memories.sync(client=client, type_="principal", principal_id=principal["principal"])
        assert {e.record_id for e in listed} == {fact.record_id, ingest.messages[0].record_id}

        missing = api.get_memory.sync_detailed("no-such-record", client=client)
        assert missing.status_code == 404
        assert isinstance(missing.parsed, models.ErrorBody) and missing.parsed.error.code == "not_found"
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "mosaic_generated" or m.startswith("mosaic_generated.")]:
            del sys.modules[name]
