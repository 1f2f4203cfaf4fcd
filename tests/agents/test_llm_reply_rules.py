"""Rules of `finbench.agents.llm_reply`, pinned on plain dicts, fake exceptions and fake network objects
(no server, no network, no subprocess):

- `read_reply`: what it refuses (no body, not an object, no choices, no message, tool_calls not a list,
  more than `MAX_CALLS` calls, a call without a function name) with its exact messages and the silent or
  content-only assistant message; what it accepts: the calls `(id, name, raw arguments)`, a missing, empty
  or non-string id becoming `call-<i>`, and the assistant message recorded (ids, `type`, arguments echoed
  as a string).
- `echo_arguments`, `tool_arguments`, `clean`, `reply_fields`: arguments as sent back and as read, lone
  surrogates, a reply body's size, JSON and depth limits, the key scrubbed.
- `scrub`, `scrub_error`, `secret_pattern`: keys shorter than `MIN_SECRET` untouched, every string (keys,
  list items, each string argument of an error, `message`, `body`) scrubbed, echoes in case, separators or
  reversed.
- `size_refusal`: int 4xx statuses only, `NOT_SIZE` excluded, 413 always, another 4xx only when message, code
  or type says the context/size is too long; the record's keys, the message scrubbed and cut at `TEXT_KEPT`.
- `too_deep`: depth counts nested dicts (through their values) and lists, scalars do not count.
- `checked_limits`: timeout > 0 finite or None, max_tokens an integer >= 1 or None, messages naming each.
- `ask` with a fake client: the request's arguments, a reply read by `reply_fields`, a size refusal returned,
  a connection error renamed with the base URL, other errors raised with the key scrubbed.
- `_deadline_backend` / `deadline_http_client` with fake inner backends: every connect, TLS start, read and
  write gets the time left before the deadline, arguments passed through unchanged, a passed deadline raises
  the matching httpcore2 timeout, reads stop past `MAX_REPLY_BYTES` + 64 KiB.
Expected values are worked out by hand from the docstrings.
"""
from __future__ import annotations

import json
import re
import time
from types import SimpleNamespace

import httpcore2
import httpx2
import openai
import pytest

from finbench.agents import llm_reply as R
from finbench.agents.llm_reply import (CONTEXT_LENGTH, MAX_CALLS, MAX_DEPTH, MAX_REPLY_BYTES, MIN_SECRET, NOT_SIZE,
                                       SCRUBBED, TEXT_KEPT, ReplyTooLarge, causes, checked_limits, clean,
                                       echo_arguments, read_reply, reply_fields, scrub, scrub_error, secret_pattern,
                                       size_refusal, tool_arguments, too_deep)
from finbench.errors import FinbenchError

KEY = "sk-test-0123456789abcdef"
SILENT = {"role": "assistant", "content": None}


def _completion(message):
    return {"body": {"id": "c1", "choices": [{"index": 0, "message": message}]}}


def _call(cid="call-a", name="ship", arguments='{"order": 1}', **extra):
    c = {"type": "function", "function": {"name": name, "arguments": arguments}, **extra}
    if cid is not _MISSING:
        c["id"] = cid
    return c


_MISSING = object()


def _replaced(got: str, before: str, after: str) -> bool:
    """`got` is `before`, the lone surrogate replaced (by U+FFFD), `after`: encodable as UTF-8."""
    got.encode("utf-8")
    return re.fullmatch(re.escape(before) + "\ufffd+" + re.escape(after), got) is not None


# --- constants ---------------------------------------------------------------------------------

def test_the_module_constants():
    assert SCRUBBED == "***" and MIN_SECRET == 8 and MAX_REPLY_BYTES == 1_000_000 and MAX_DEPTH == 32
    assert MAX_CALLS == 16 and R.MAX_ARGS_DEPTH == 8 and TEXT_KEPT == 2000 and CONTEXT_LENGTH == "context_length"
    assert NOT_SIZE == (401, 403, 404, 408, 409, 429)


# --- read_reply: what it refuses -------------------------------------------------------------------

def test_a_record_without_body_could_not_be_read_and_says_why():
    assert read_reply({"invalid": "the reply is not JSON (x)"}) == (
        SILENT, [], "your reply could not be read (the reply is not JSON (x))")
    assert read_reply({}) == (SILENT, [], "your reply could not be read (no body)")
    assert read_reply({"invalid": 5}) == (SILENT, [], "your reply could not be read (no body)")


@pytest.mark.parametrize("body, why", [
    ([1], "a JSON list, not an object"),
    ("text", "a JSON str, not an object"),
    (7, "a JSON int, not an object"),
    ({}, "no list of choices"),
    ({"choices": None}, "no list of choices"),
    ({"choices": {"0": {}}}, "no list of choices"),
    ({"choices": []}, "no list of choices"),
    ({"choices": ["x"]}, "choices[0] is not an object"),
    ({"choices": [None]}, "choices[0] is not an object"),
    ({"choices": [{}]}, "choices[0] has no message object"),
    ({"choices": [{"message": "hi"}]}, "choices[0] has no message object"),
    ({"choices": [{"message": [{"content": "hi"}]}]}, "choices[0] has no message object"),
])
def test_a_body_that_is_not_a_chat_completion_is_refused_with_a_silent_assistant(body, why):
    assert read_reply({"body": body}) == (SILENT, [], f"your reply was not a chat completion ({why})")


@pytest.mark.parametrize("calls, kind", [("ship", "str"), ({}, "dict"), (5, "int"), (True, "bool")])
def test_tool_calls_that_are_not_a_list_are_refused_keeping_the_content(calls, kind):
    msg, out, why = read_reply(_completion({"role": "assistant", "content": "thinking", "tool_calls": calls}))
    assert msg == {"role": "assistant", "content": "thinking"} and out == []
    assert why == f"your reply's tool_calls is not a list but a JSON {kind}"


def test_more_than_max_calls_is_one_malformed_call_and_max_calls_is_fine():
    calls = [_call(f"c{i}") for i in range(17)]
    msg, out, why = read_reply(_completion({"content": None, "tool_calls": calls}))
    assert (msg, out, why) == (SILENT, [], "your reply made 17 tool calls")
    msg, out, why = read_reply(_completion({"content": None, "tool_calls": calls[:16]}))
    assert why is None and [c[0] for c in out] == [f"c{i}" for i in range(16)]


@pytest.mark.parametrize("bad_call", [
    "ship", None, {"id": "x", "type": "function"}, {"id": "x", "function": None},
    {"id": "x", "function": "ship"}, {"id": "x", "function": {"arguments": "{}"}},
    {"id": "x", "function": {"name": 5}}, {"id": "x", "function": {"name": None}},
])
def test_a_call_without_a_function_name_is_refused_naming_its_index(bad_call):
    msg, out, why = read_reply(_completion({"content": "c", "tool_calls": [_call("ok"), bad_call]}))
    assert msg == {"role": "assistant", "content": "c"} and out == []
    assert why == "your reply's tool call 1 is not an object with a function name"


# --- read_reply: what it accepts -------------------------------------------------------------------

def test_a_reply_without_calls_is_well_formed_content_kept_or_none():
    for message in ({"content": "hello"}, {"content": "hello", "tool_calls": None}, {"content": "hello", "tool_calls": []}):
        assert read_reply(_completion(message)) == ({"role": "assistant", "content": "hello"}, [], None)
    for content in (None, 5, ["a"], {"t": "x"}):
        assert read_reply(_completion({"content": content})) == (SILENT, [], None)
    assert read_reply(_completion({})) == (SILENT, [], None)
    # a lone surrogate in the content is replaced
    assert _replaced(read_reply(_completion({"content": "a\ud800b"}))[0]["content"], "a", "b")


def test_the_calls_and_the_assistant_message_recorded():
    calls = [_call("id-1", "ship", '{"order": 1}'), _call("id-2", "refund", {"b": 2, "a": 1}),
             _call("id-3", "wait", None)]
    msg, out, why = read_reply(_completion({"role": "assistant", "content": "doing it", "tool_calls": calls}))
    assert why is None
    assert out == [("id-1", "ship", '{"order": 1}'), ("id-2", "refund", {"b": 2, "a": 1}), ("id-3", "wait", None)]
    assert msg == {"role": "assistant", "content": "doing it", "tool_calls": [
        {"id": "id-1", "type": "function", "function": {"name": "ship", "arguments": '{"order": 1}'}},
        {"id": "id-2", "type": "function", "function": {"name": "refund", "arguments": '{"a": 1, "b": 2}'}},
        {"id": "id-3", "type": "function", "function": {"name": "wait", "arguments": "{}"}},
    ]}


def test_a_missing_empty_or_non_string_call_id_becomes_call_i():
    calls = [_call("given"), _call(_MISSING), _call(""), _call(7), _call(None), _call(["x"]), _call("also")]
    msg, out, why = read_reply(_completion({"content": None, "tool_calls": calls}))
    ids = ["given", "call-1", "call-2", "call-3", "call-4", "call-5", "also"]
    assert why is None and [c[0] for c in out] == ids
    assert [c["id"] for c in msg["tool_calls"]] == ids


def test_call_ids_and_names_are_cleaned_of_lone_surrogates():
    msg, out, why = read_reply(_completion({"tool_calls": [_call("i\udc00d", "sh\ud800ip", "{}")]}))
    assert why is None and len(out) == 1 and out[0][2] == "{}"
    assert _replaced(out[0][0], "i", "d") and _replaced(out[0][1], "sh", "ip")
    assert msg["tool_calls"][0]["id"] == out[0][0] and msg["tool_calls"][0]["function"]["name"] == out[0][1]


# --- arguments, clean, reply_fields -------------------------------------------------------------------

def test_echo_arguments_is_always_a_string():
    assert echo_arguments('{"x": 1}') == '{"x": 1}'
    assert echo_arguments("not json") == "not json"
    assert echo_arguments(None) == "{}"
    assert echo_arguments({"b": [1, 2], "a": None}) == '{"a": null, "b": [1, 2]}'
    assert echo_arguments(5) == "5"
    assert _replaced(echo_arguments("x\ud800"), "x", "")


def test_tool_arguments_reads_a_json_object_or_says_why_not():
    assert tool_arguments('{"order": 3}') == {"order": 3}
    assert tool_arguments({"order": 3}) == {"order": 3}
    assert tool_arguments(None) == {} and tool_arguments("null") == {}
    for raw, why in (("[1]", "not a JSON object"), ("5", "not a JSON object"), ([1], "not a JSON object"),
                     ("[" * 100_000 + "]" * 100_000, "nested too deeply")):
        with pytest.raises(ValueError, match=f"^{why}$"):
            tool_arguments(raw)
    with pytest.raises(ValueError):
        tool_arguments("{not json")
    nine = json.dumps({"a": [[[[[[[[1]]]]]]]]})  # the object and 8 lists: 9 levels
    with pytest.raises(ValueError, match="^nested more than 8 levels deep$"):
        tool_arguments(nine)
    eight = {"a": [[[[[[[1]]]]]]]}
    assert tool_arguments(json.dumps(eight)) == eight
    ((k, v),) = tool_arguments('{"k\\ud800": "v\\udc00"}').items()
    assert _replaced(k, "k", "") and _replaced(v, "v", "")


def test_clean_replaces_lone_surrogates_only():
    assert clean("plain é ✓") == "plain é ✓"
    got = clean("a\ud800b\udfffc")
    assert re.fullmatch("a\ufffd+b\ufffd+c", got) and got.encode("utf-8")


def test_reply_fields_reads_json_and_scrubs_the_key():
    assert reply_fields(b'{"a": [1, 2]}', None) == {"body": {"a": [1, 2]}}
    assert reply_fields(b'\xef\xbb\xbf{"a": 1}', None) == {"body": {"a": 1}}  # a BOM is skipped
    assert reply_fields(json.dumps({KEY: f"key {KEY}"}).encode(), KEY) == {"body": {SCRUBBED: f"key {SCRUBBED}"}}


def test_reply_fields_size_limit():
    over = b" " * (MAX_REPLY_BYTES + 1)
    assert reply_fields(over, None) == {"invalid": "the reply is 1000001 bytes, over the limit of 1000000"}
    at = b"[" + b" " * (MAX_REPLY_BYTES - 2) + b"]"
    assert reply_fields(at, None) == {"body": []}


def test_reply_fields_not_json_keeps_the_start_scrubbed():
    text = f"oops {KEY} " + "x" * 5000
    rec = reply_fields(text.encode(), KEY)
    assert set(rec) == {"invalid", "text"} and rec["invalid"].startswith("the reply is not JSON (")
    assert rec["text"] == (f"oops {SCRUBBED} " + "x" * 5000)[:2000] and len(rec["text"]) == 2000
    deep = reply_fields(b"[" * 200_000, None)
    assert deep["invalid"] == "the reply is not JSON (nested too deeply to read)" and deep["text"] == "[" * 2000


def test_reply_fields_depth_limit():
    ok = "[" * 32 + "]" * 32
    assert reply_fields(ok.encode(), None) == {"body": json.loads(ok)}
    deep = "[" * 33 + "]" * 33
    assert reply_fields(deep.encode(), None) == {"invalid": "the reply is nested more than 32 levels deep",
                                                 "text": deep}


# --- too_deep --------------------------------------------------------------------------------------

def test_too_deep_counts_lists_and_dicts_by_their_values():
    assert too_deep(5, 0) is False and too_deep("x", 0) is False and too_deep(None, 0) is False
    assert too_deep([], 0) is True and too_deep([], 1) is False and too_deep({}, 0) is True
    assert too_deep([[]], 1) is True and too_deep([[]], 2) is False
    assert too_deep({"a": {"b": []}}, 2) is True and too_deep({"a": {"b": []}}, 3) is False
    # a dict's values are walked (its keys are strings and never nest)
    assert too_deep({"a": [[1]]}, 2) is True and too_deep({"a": [[1]]}, 3) is False
    assert too_deep({"k": 1, "z": {"y": [{"x": 1}]}}, 3) is True and too_deep({"k": 1, "z": {"y": [{"x": 1}]}}, 4) is False
    # a deep branch after shallow siblings is still found
    assert too_deep([1, [2], [3, [4, [5]]]], 3) is True and too_deep([1, [2], [3, [4, [5]]]], 4) is False
    # no recursion: a very deep value is walked
    deep = []
    for _ in range(100_000):
        deep = [deep]
    assert too_deep(deep, 100_000) is True and too_deep(deep, 100_001) is False


# --- scrub, scrub_error, secret_pattern ------------------------------------------------------------------

def test_scrub_replaces_the_key_in_every_string_keys_too():
    obj = {"a": [f"x {KEY} y", 5, None, 1.5, {KEY: KEY}], KEY + "!": True}
    assert scrub(obj, KEY) == {"a": [f"x {SCRUBBED} y", 5, None, 1.5, {SCRUBBED: SCRUBBED}], SCRUBBED + "!": True}
    assert scrub(f"a{KEY}b{KEY}", KEY) == f"a{SCRUBBED}b{SCRUBBED}"


def test_scrub_leaves_everything_when_the_key_is_short_or_absent():
    obj = {"abcdefg": ["abcdefg x"]}
    assert scrub(obj, "abcdefg") is obj  # 7 characters: below MIN_SECRET
    assert scrub(obj, None) is obj and scrub(obj, "") is obj
    assert scrub({"abcdefgh": ["abcdefgh x"]}, "abcdefgh") == {SCRUBBED: [f"{SCRUBBED} x"]}  # 8: scrubbed


def test_secret_pattern_matches_echoes_of_the_key():
    p = secret_pattern(KEY)
    for echoed in (KEY, KEY.upper(), KEY[::-1], KEY.upper()[::-1], "sk_test_0123456789abcdef", "sktest0123456789abcdef",
                   "s k-t.e s t 0 1 2 3 4 5 6 7 8 9 a b c d e f", "sk-test-0123456789ABCDEF"):
        assert p.fullmatch(echoed), echoed
    for other in ("sk-test-0123456789abcdee", "sk-test-0123456789abcde", "s    k-test-0123456789abcdef"):
        assert not p.fullmatch(other), other
    # fewer than MIN_SECRET characters besides separators: matched only as it is
    short = secret_pattern("a-b-c-d-e")
    assert short.fullmatch("a-b-c-d-e") and not short.fullmatch("A-B-C-D-E") and not short.fullmatch("abcde")
    # the boundary: 8 characters besides separators are loosened, 7 are not
    assert secret_pattern("abcdefgh").fullmatch("H-G-F-E-D-C-B-A")
    assert scrub("key ABCDEFGH", "abcdefgh") == f"key {SCRUBBED}"
    assert scrub("key ABCDEFG- and abcdefg-", "abcdefg-") == f"key ABCDEFG- and {SCRUBBED}"


def test_scrub_error_scrubs_every_string_argument_message_and_body():
    e = Exception(f"denied for {KEY}", 5, KEY.upper(), None)
    scrub_error(e, KEY)
    assert e.args == (f"denied for {SCRUBBED}", 5, SCRUBBED, None) and str(e) == str((f"denied for {SCRUBBED}", 5, SCRUBBED, None))

    e = Exception(f"k={KEY}")
    e.message, e.body = f"m {KEY}", {"error": {"message": f"bad key {KEY[::-1]}", "n": 1}}
    scrub_error(e, KEY)
    assert e.args == (f"k={SCRUBBED}",) and e.message == f"m {SCRUBBED}"
    assert e.body == {"error": {"message": f"bad key {SCRUBBED}", "n": 1}}


def test_scrub_error_on_an_openai_error():
    req = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    e = openai.APIStatusError(f"Error code: 401 - key {KEY}", response=httpx2.Response(401, request=req),
                              body={"message": f"key {KEY}"})
    scrub_error(e, KEY)
    assert str(e) == f"Error code: 401 - key {SCRUBBED}" and e.message == f"Error code: 401 - key {SCRUBBED}"
    assert e.body == {"message": f"key {SCRUBBED}"}


@pytest.mark.parametrize("secret", [None, "", "abcdefg"])
def test_scrub_error_leaves_the_error_when_the_key_is_short_or_absent(secret):
    e = Exception("abcdefg is here", "abcdefg")
    e.body = {"abcdefg": "abcdefg"}
    scrub_error(e, secret)
    assert e.args == ("abcdefg is here", "abcdefg") and e.body == {"abcdefg": "abcdefg"}


def test_scrub_error_drops_a_body_it_cannot_scrub():
    deep = [KEY]
    for _ in range(50_000):
        deep = [deep]
    e = Exception(f"x {KEY}")
    e.body = deep
    scrub_error(e, KEY)
    assert e.args == (f"x {SCRUBBED}",) and e.body is None


# --- size_refusal --------------------------------------------------------------------------------

class Err(Exception):
    """A fake client error: `status_code`, and `message`, `code`, `type` only when given."""

    def __init__(self, text="", status=400, **attrs):
        super().__init__(text)
        self.status_code = status
        for k, v in attrs.items():
            setattr(self, k, v)


def _refused(status, error):
    return {"ended": "context_length", "status": status, "error": error}


def test_a_413_is_always_a_size_refusal():
    assert size_refusal(Err("Request Entity Too Big", 413), None) == _refused(413, "Request Entity Too Big")
    assert size_refusal(Err("", 413, message="nope"), None) == _refused(413, "nope")


@pytest.mark.parametrize("status", [400, 422, 499])
def test_another_4xx_is_a_size_refusal_only_when_its_words_say_so(status):
    said = "This model's maximum context length is 4096 tokens"
    assert size_refusal(Err(said, status), None) == _refused(status, said)
    assert size_refusal(Err("invalid request: bad role", status), None) is None


@pytest.mark.parametrize("words", ["context window full", "CONTEXT", "prompt too long", "body too large",
                                   "Too Long", "exceeds the limit", "exceeded", "n_ctx = 2048",
                                   "4097 tokens", "max (tokens)"])
def test_the_size_words(words):
    assert size_refusal(Err(words, 400), None) == _refused(400, words)


@pytest.mark.parametrize("words", ["bad request", "token budget", "maxtokens", "too  long", "toolong", "big"])
def test_words_that_do_not_say_size(words):
    assert size_refusal(Err(words, 400), None) is None


@pytest.mark.parametrize("status", [None, "400", 400.0, True, 399, 500, 503, 200, *NOT_SIZE])
def test_only_int_4xx_statuses_outside_not_size_are_read(status):
    assert size_refusal(Err("context too long, 413", status), None) is None


def test_an_error_without_a_status_is_not_a_size_refusal():
    assert size_refusal(ValueError("context too long"), None) is None


def test_message_code_and_type_are_all_read():
    # the message attribute, not str(exc), is the message
    e = Err("something else", 400, message="prompt is too long")
    assert size_refusal(e, None) == _refused(400, "prompt is too long")
    # the words may be in the code or the type only; the error is still the message
    assert size_refusal(Err("Bad request", 400, code="context_length_exceeded"), None) == _refused(400, "Bad request")
    assert size_refusal(Err("Bad request", 400, type="tokens limit"), None) == _refused(400, "Bad request")
    assert size_refusal(Err("Bad request", 400, code="invalid", type="invalid_request_error"), None) is None
    # a message that is not a string: str(exc) instead
    assert size_refusal(Err("context too long", 400, message=None), None) == _refused(400, "context too long")
    assert size_refusal(Err("context too long", 400, message={"m": 1}), None) == _refused(400, "context too long")


def test_an_error_without_code_or_type_attributes_is_read():
    e = Err("Payload too large", 413)
    assert not hasattr(e, "type") and not hasattr(e, "code") and not hasattr(e, "message")
    assert size_refusal(e, None) == _refused(413, "Payload too large")


def test_the_refusal_error_is_scrubbed_cleaned_and_cut():
    said = f"key {KEY} context too long " + "y" * 3000
    got = size_refusal(Err(said, 400), KEY)
    assert list(got) == ["ended", "status", "error"]
    assert got["error"] == (f"key {SCRUBBED} context too long " + "y" * 3000)[:2000]
    assert len(got["error"]) == 2000
    assert _replaced(size_refusal(Err("context \ud800", 413), None)["error"], "context ", "")


def test_an_openai_bad_request_for_context_length_is_a_refusal():
    req = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    body = {"message": "too many", "code": "context_length_exceeded", "type": "invalid_request_error"}
    e = openai.BadRequestError("Error code: 400", response=httpx2.Response(400, request=req), body=body)
    assert size_refusal(e, None) == _refused(400, "Error code: 400")


# --- checked_limits ------------------------------------------------------------------------------

def test_checked_limits_accepts_none_and_in_range_values():
    assert checked_limits("W", None, None) == (None, None)
    assert checked_limits("W", 5, 1) == (5.0, 1) and type(checked_limits("W", 5, 1)[0]) is float
    assert checked_limits("W", 0.001, 4096) == (0.001, 4096)


@pytest.mark.parametrize("max_tokens, shown", [(0, "0"), (-3, "-3"), (1.5, "1.5"), (True, "True"), ("10", "'10'"),
                                               (2.0, "2.0")])
def test_checked_limits_refuses_max_tokens_naming_it(max_tokens, shown):
    with pytest.raises(FinbenchError) as err:
        checked_limits("ModelAgent", 5, max_tokens)
    assert str(err.value) == f"ModelAgent: max_tokens must be an integer >= 1 or None, got {shown}"


@pytest.mark.parametrize("timeout, shown", [(0, "0"), (-1, "-1"), (float("inf"), "inf"), (float("nan"), "nan"),
                                            (True, "True"), ("5", "'5'")])
def test_checked_limits_refuses_timeout_naming_it(timeout, shown):
    with pytest.raises(FinbenchError) as err:
        checked_limits("ModelAgent", timeout, 10)
    assert str(err.value) == f"ModelAgent: timeout must be a finite number of seconds > 0 or None, got {shown}"


def test_checked_limits_checks_max_tokens_first():
    with pytest.raises(FinbenchError, match="^W: max_tokens must"):
        checked_limits("W", 0, 0)


# --- ask, with a fake client ---------------------------------------------------------------------

BASE = "http://127.0.0.1:9/v1/"
REQ = httpx2.Request("POST", BASE + "chat/completions")


class Client:
    """A fake `openai.OpenAI`: `create` records its arguments and returns `reply` bytes or raises `error`."""

    def __init__(self, reply=b"{}", error=None, base_url=BASE):
        self.base_url, self.calls, self._reply, self._error = base_url, [], reply, error
        self.chat = SimpleNamespace(completions=SimpleNamespace(with_raw_response=SimpleNamespace(create=self._create)))

    def _create(self, **kw):
        self.calls.append(kw)
        if self._error is not None:
            raise self._error
        return SimpleNamespace(http_response=SimpleNamespace(content=self._reply))


def test_ask_sends_the_request_and_reads_the_reply():
    reply = json.dumps({"choices": [{"message": {"content": f"hi {KEY}"}}]}).encode()
    c = Client(reply)
    got = R.ask(c, "m1", [{"role": "user", "content": "x"}], [{"type": "function"}], {"max_tokens": 7}, KEY)
    assert got == {"body": {"choices": [{"message": {"content": f"hi {SCRUBBED}"}}]}}
    assert c.calls == [{"model": "m1", "messages": [{"role": "user", "content": "x"}],
                        "tools": [{"type": "function"}], "max_tokens": 7}]
    bad_json = R.ask(Client(b"nope"), "m", [], [], {}, None)
    assert bad_json["invalid"].startswith("the reply is not JSON (") and bad_json["text"] == "nope"


def test_ask_returns_a_reply_too_large_as_invalid():
    assert R.ask(Client(error=ReplyTooLarge("the reply is over 1000000 bytes")), "m", [], [], {}, None) == {
        "invalid": "the reply is over 1000000 bytes"}


def test_ask_returns_a_size_refusal():
    e = openai.BadRequestError(f"maximum context length exceeded ({KEY})", response=httpx2.Response(400, request=REQ),
                               body=None)
    assert R.ask(Client(error=e), "m", [], [], {}, KEY) == _refused(400, f"maximum context length exceeded ({SCRUBBED})")


def test_ask_raises_other_status_errors_scrubbed():
    e = openai.AuthenticationError(f"bad key {KEY}", response=httpx2.Response(401, request=REQ),
                                   body={"error": f"bad key {KEY}"})
    with pytest.raises(openai.AuthenticationError) as err:
        R.ask(Client(error=e), "m", [], [], {}, KEY)
    assert err.value is e and e.message == f"bad key {SCRUBBED}" and e.body == {"error": f"bad key {SCRUBBED}"}
    # a 400 whose words are not about size is raised too
    e = openai.BadRequestError("unknown role", response=httpx2.Response(400, request=REQ), body=None)
    with pytest.raises(openai.BadRequestError):
        R.ask(Client(error=e), "m", [], [], {}, KEY)


def test_ask_names_the_server_that_did_not_answer():
    e = openai.APIConnectionError(request=REQ)
    with pytest.raises(openai.APIConnectionError) as err:
        R.ask(Client(error=e, base_url=f"http://h/{KEY}/v1/"), "m", [], [], {}, KEY)
    want = f"Connection error: no answer from http://h/{SCRUBBED}/v1/ (is the server running, and is base_url right?)"
    assert str(err.value) == want and err.value.message == want
    assert err.value is not e and err.value.__cause__ is e and err.value.request is REQ
    assert type(err.value) is openai.APIConnectionError


def test_ask_raises_a_timeout_as_it_is_scrubbed():
    e = openai.APITimeoutError(request=REQ)
    e.args = (f"Request timed out ({KEY})",)
    with pytest.raises(openai.APITimeoutError) as err:
        R.ask(Client(error=e), "m", [], [], {}, KEY)
    assert err.value is e and e.args == (f"Request timed out ({SCRUBBED})",)


def test_ask_reads_a_body_that_does_not_decode_as_invalid():
    e = openai.APIConnectionError(request=REQ)
    e.__cause__ = httpx2.DecodingError("Error -3 while decompressing data")
    assert R.ask(Client(error=e), "m", [], [], {}, None) == {
        "invalid": "the reply's content encoding does not decode (Error -3 while decompressing data)"}


def test_causes_walks_cause_then_context_once():
    a, b, c = ValueError("a"), KeyError("b"), TypeError("c")
    a.__cause__, b.__context__, c.__cause__ = b, c, a  # a cycle
    assert list(causes(a)) == [a, b, c]
    assert list(causes(None)) == []


# --- _deadline_backend and deadline_http_client, with fake inner objects ------------------------------

class InnerStream:
    def __init__(self, data=b"abc", name="plain"):
        self.data, self.name, self.calls = data, name, []

    def read(self, max_bytes, timeout=None):
        self.calls.append(("read", max_bytes, timeout))
        return self.data

    def write(self, buffer, timeout=None):
        self.calls.append(("write", buffer, timeout))

    def close(self):
        self.calls.append(("close",))

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        self.calls.append(("start_tls", ssl_context, server_hostname, timeout))
        self.tls = InnerStream(b"tls-bytes", "tls")
        return self.tls

    def get_extra_info(self, info):
        return f"{self.name}:{info}"


class InnerBackend:
    def __init__(self):
        self.calls, self.stream = [], InnerStream()

    def connect_tcp(self, *args):
        self.calls.append(("tcp", *args))
        return self.stream

    def connect_unix_socket(self, *args):
        self.calls.append(("unix", *args))
        return self.stream

    def sleep(self, seconds):
        self.calls.append(("sleep", seconds))


@pytest.fixture
def Backend(monkeypatch):
    monkeypatch.setattr(R, "_DEADLINE_BACKEND", None)  # build it afresh in this test
    return R._deadline_backend()


def _state(deadline=None, seconds=5, received=0):
    return SimpleNamespace(seconds=seconds, deadline=deadline, received=received)


def test_the_backend_is_built_once_as_an_httpcore2_backend(Backend):
    assert R._deadline_backend() is Backend and issubclass(Backend, httpcore2.NetworkBackend)


def test_without_a_deadline_every_argument_passes_through(Backend):
    inner = InnerBackend()
    b = Backend(inner, _state())
    s = b.connect_tcp("example.org", 443, 3.0, "10.0.0.1", ["opt"])
    assert inner.calls == [("tcp", "example.org", 443, 3.0, "10.0.0.1", ["opt"])]
    assert isinstance(s, httpcore2.NetworkStream) and s.read(10, 2.0) == b"abc"
    assert inner.stream.calls == [("read", 10, 2.0)]
    s.write(b"xy", 1.5)
    assert inner.stream.calls[-1] == ("write", b"xy", 1.5)
    assert s.get_extra_info("ssl_object") == "plain:ssl_object"
    s.close()
    assert inner.stream.calls[-1] == ("close",)
    b.sleep(0.25)
    assert inner.calls[-1] == ("sleep", 0.25)


def test_a_unix_socket_connects_through_the_inner_backend(Backend):
    inner = InnerBackend()
    s = Backend(inner, _state()).connect_unix_socket("/tmp/llm.sock", 4.0, ["opt"])
    assert inner.calls == [("unix", "/tmp/llm.sock", 4.0, ["opt"])]
    assert s.read(5) == b"abc" and s.get_extra_info("x") == "plain:x"


def test_start_tls_wraps_the_inner_tls_stream(Backend):
    inner = InnerBackend()
    s = Backend(inner, _state()).connect_tcp("example.org", 443, 3.0)
    ctx = object()
    tls = s.start_tls(ctx, "example.org", 2.5)
    assert inner.stream.calls == [("start_tls", ctx, "example.org", 2.5)]
    assert isinstance(tls, httpcore2.NetworkStream) and tls.read(7) == b"tls-bytes"
    assert tls.get_extra_info("ssl_object") == "tls:ssl_object"
    assert inner.stream.tls.calls == [("read", 7, None)]


def test_before_the_deadline_each_step_gets_the_time_left(Backend):
    inner = InnerBackend()
    state = _state(deadline=time.monotonic() + 100, seconds=100)
    b = Backend(inner, state)
    s = b.connect_tcp("h", 80, None)
    t = inner.calls[-1][3]
    assert isinstance(t, float) and 90 < t <= 100  # no timeout of its own: the time left
    b.connect_tcp("h", 80, 1000.0)
    assert 90 < inner.calls[-1][3] <= 100  # a longer timeout is cut to the time left
    b.connect_tcp("h", 80, 1.5)
    assert inner.calls[-1][3] == 1.5  # a shorter one is kept
    b.connect_unix_socket("/s", None)
    assert 90 < inner.calls[-1][2] <= 100
    s.read(1, None)
    s.write(b"x", 2000.0)
    s.start_tls(None, "h", None)
    read, write, tls = inner.stream.calls
    assert 90 < read[2] <= 100 and 90 < write[2] <= 100 and 90 < tls[3] <= 100


def test_after_the_deadline_each_step_raises_its_timeout(Backend):
    inner = InnerBackend()
    ok = Backend(inner, _state())
    s = ok.connect_tcp("h", 80, 1.0)  # connected before the deadline passed
    state = _state(deadline=time.monotonic() - 1, seconds=7)
    b = Backend(inner, state)
    s._state = state
    msg = "^no complete reply within the 7 s deadline$"
    with pytest.raises(httpcore2.ConnectTimeout, match=msg):
        b.connect_tcp("h", 80, 1.0)
    with pytest.raises(httpcore2.ConnectTimeout, match=msg):
        b.connect_unix_socket("/s", 1.0)
    with pytest.raises(httpcore2.ReadTimeout, match=msg):
        s.read(10, 1.0)
    with pytest.raises(httpcore2.WriteTimeout, match=msg):
        s.write(b"x", 1.0)
    with pytest.raises(httpcore2.ConnectTimeout, match=msg):
        s.start_tls(None, "h", 1.0)
    assert inner.calls == [("tcp", "h", 80, 1.0, None, None)] and inner.stream.calls == []


def test_reads_stop_past_max_reply_bytes_and_the_headers_room(Backend):
    inner = InnerBackend()
    limit = MAX_REPLY_BYTES + 2 ** 16
    state = _state(received=limit - 5)
    s = Backend(inner, state).connect_tcp("h", 80)
    inner.stream.data = b"12345"
    assert s.read(5) == b"12345" and state.received == limit  # at the limit: still read
    inner.stream.data = b"6"
    with pytest.raises(ReplyTooLarge, match="^the reply is over 1000000 bytes$"):
        s.read(1)
    # without a count (no request started through the hook) nothing is counted
    free = SimpleNamespace(seconds=None, deadline=None)
    s = Backend(inner, free).connect_tcp("h", 80)
    inner.stream.data = b"x" * 10
    assert s.read(10) == b"x" * 10 and not hasattr(free, "received")


def test_deadline_http_client_installs_the_backend_and_starts_each_request(Backend):
    http = R.deadline_http_client(5)
    backend = http._transport._pool._network_backend
    assert isinstance(backend, Backend)
    (start,) = http._event_hooks["request"]
    backend._state.received = 123
    before = time.monotonic()
    start(None)
    st = backend._state
    assert st.seconds == 5 and st.received == 0 and before + 5 <= st.deadline <= time.monotonic() + 5
    none = R.deadline_http_client(None)
    none._event_hooks["request"][0](None)
    st = none._transport._pool._network_backend._state
    assert st.seconds is None and st.deadline is None and st.received == 0
    http.close()
    none.close()


def test_clean_replaces_each_lone_surrogate_by_one_replacement_character():
    from finbench.agents.llm_reply import clean
    assert clean("a\ud800b") == "a\ufffdb"
    assert clean("\udfff") == "\ufffd"
    assert clean("x\ud83d\ude00y") == "x\ufffd\ufffdy"  # two surrogate code points, not one character: two
    assert clean("plain ü 😀") == "plain ü 😀"  # encodable text is returned unchanged
