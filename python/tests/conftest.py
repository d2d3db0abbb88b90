"""Fixtures: the project's patched moto server, started as the Go tests
start it (internal/moto/moto.go), and an outbox table on it."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from vectors import ROOT  # noqa: E402

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

MOTO = ROOT / "internal" / "moto"


def _moto_python() -> Path | None:
    """The Python that has moto: $OUTFLOW_MOTO_PYTHON, else the project
    virtualenv (make venv-moto installs it), as moto.go finds it."""
    if env := os.environ.get("OUTFLOW_MOTO_PYTHON"):
        return Path(env)
    python = ROOT / ".venv" / "bin" / "python"
    return python if (ROOT / ".venv" / "bin" / "moto_server").exists() else None


def _die_with_parent() -> None:
    """In the child: its own process group, and SIGTERM when pytest dies."""
    os.setpgrp()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    """A moto server with atomic conditional writes (server.py), on a
    loopback port whose listening socket it inherits, so no other process
    can take the port between choosing it and moto serving on it."""
    if endpoint := os.environ.get("OUTFLOW_TEST_ENDPOINT"):
        yield endpoint
        return
    python = _moto_python()
    if python is None:
        reason = "moto is not installed: run `make venv-moto` in Outflow's repository, or set OUTFLOW_MOTO_PYTHON"
        if os.environ.get("OUTFLOW_REQUIRE_MOTO"):  # make test: a skipped live test would prove nothing
            pytest.fail(reason)
        pytest.skip(reason)
    code = (MOTO / "cloudformation.py").read_text() + "\n" + (MOTO / "server.py").read_text()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    env = {**os.environ, "OUTFLOW_MOTO_FD": str(sock.fileno())}
    out = None if os.environ.get("OUTFLOW_MOTO_LOG") else subprocess.DEVNULL
    proc = subprocess.Popen(
        [str(python), "-c", code, "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        pass_fds=(sock.fileno(),),
        stdout=out,
        stderr=out,
        preexec_fn=_die_with_parent,
    )
    # moto has its own copy now; ours closed, a moto that died leaves
    # connections refused rather than queued on a socket nobody serves.
    sock.close()
    url = f"http://127.0.0.1:{port}"
    try:
        # Its start is seconds of CPU (importing moto); on 2 loaded cores
        # it took over 30 s for the Go tests, so the bound is generous.
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(url + "/moto-api/", timeout=5):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="session")
def dynamodb(moto_url: str) -> DynamoDBClient:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "dynamodb",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 5, "mode": "standard"}),
    )


@pytest.fixture(scope="session")
def sqs(moto_url: str) -> Any:
    """A boto3 SQS client on the moto server (thread-safe: a Poller's
    groups share it)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "sqs",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 5, "mode": "standard"}),
    )


def create_queue(sqs: Any, fifo: bool) -> str:
    """A new queue on moto, its URL: FIFO (content-based deduplication
    off, as Outflow's queues are) or standard."""
    name = "outflow-py-" + uuid.uuid4().hex[:12]
    if fifo:
        url: str = sqs.create_queue(QueueName=name + ".fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"})["QueueUrl"]
    else:
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
    return url


def queue_counts(sqs: Any, url: str) -> tuple[int, int]:
    """The queue's messages visible and in flight (moto counts them
    exactly)."""
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def create_inbox_table(client: DynamoDBClient, name: str) -> None:
    """A consumer's table as Go's consume.CreateTable makes it (TTL aside)."""
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 600})  # type: ignore[typeddict-item]


@pytest.fixture
def inbox_table(dynamodb: DynamoDBClient) -> Iterator[str]:
    """A new consumer's table, deleted after the test."""
    name = "outflow-py-consume-" + uuid.uuid4().hex[:12]
    create_inbox_table(dynamodb, name)
    yield name
    dynamodb.delete_table(TableName=name)


def create_table(client: DynamoDBClient, name: str) -> None:
    """An outbox table as Go's dynamo.Table.CreateTableInput makes it."""
    index: Any = [
        {
            "IndexName": "due",
            "KeySchema": [{"AttributeName": "shard", "KeyType": "HASH"}, {"AttributeName": "due_at", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["created_at", "queue", "prev", "seq"]},
        },
        {
            "IndexName": "dead",
            "KeySchema": [{"AttributeName": "dead_queue", "KeyType": "HASH"}, {"AttributeName": "failed_at", "KeyType": "RANGE"}],
            "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["attempt", "last_error"]},
        },
    ]
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "dead_queue", "AttributeType": "S"},
            {"AttributeName": "due_at", "AttributeType": "N"},
            {"AttributeName": "failed_at", "AttributeType": "N"},
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "shard", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=index,
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 0.1, "MaxAttempts": 600})  # type: ignore[typeddict-item]


@pytest.fixture
def table(dynamodb: DynamoDBClient) -> Iterator[str]:
    """A new outbox table, deleted after the test."""
    name = "outflow-py-" + uuid.uuid4().hex[:12]
    create_table(dynamodb, name)
    yield name
    dynamodb.delete_table(TableName=name)
