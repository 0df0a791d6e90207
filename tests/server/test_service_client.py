"""The client's HTTP plumbing on answers a real server would not give (httpx.MockTransport)."""
from __future__ import annotations

import httpx
import pytest

from server.client import APIError, ServiceClient


def client_answering(body: bytes, headers: dict[str, str], status: int = 200) -> ServiceClient:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))

    return ServiceClient("http://test", "token", progress=False, transport=httpx.MockTransport(answer))


def test_a_binary_answer_fills_one_buffer_of_its_declared_length():
    body = bytes(range(256)) * 5_000
    with client_answering(body, {"content-length": str(len(body))}) as api:
        got = api.checkpoint("job", 1)
        assert got == body and isinstance(got, bytearray)
        assert (api.traffic.requests, api.traffic.received) == (1, len(body))


@pytest.mark.parametrize("declared, message", [(1_000, "truncated: 10 of 1000"), (4, "longer than its Content-Length")])
def test_a_binary_answer_that_breaks_its_content_length_is_refused(declared, message):
    with client_answering(b"0123456789", {"content-length": str(declared)}) as api:
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            api.checkpoint("job", 1)


def test_an_answer_without_content_length_is_read_whole():
    with client_answering(b"abc", {}) as api:
        assert api.checkpoint("job", 1) == b"abc"


def test_an_error_answer_raises_with_the_servers_message():
    with client_answering(b'{"error": "NotFoundError", "detail": "no job x"}', {"content-type": "application/json"},
                          status=404) as api:
        with pytest.raises(APIError, match="HTTP 404 NotFoundError: no job x") as raised:
            api.checkpoint("x", 1)
    assert raised.value.status == 404 and api.traffic.requests == 1
