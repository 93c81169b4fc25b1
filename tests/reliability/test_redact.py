"""The secret class evalkit masks (evalkit/redact.py), and the lean transport's URL: a query
string stays after the path, user-info becomes a Basic header, neither shows in errors."""

from __future__ import annotations

import base64
import os

import pytest

from evalkit.judges.llm._transport import chat_url
from evalkit.judges.llm.hallucination import HallucinationLlmJudge
from evalkit.redact import (
    REDACTED,
    hide_secret_overrides,
    is_secret_name,
    mask,
    mask_override,
    mask_tree,
    register_url,
)
from tests.reliability.judge_support import Reply, judge, make, records

KEY = "sk-test-0123456789abcdefXYZ"
ROW = {"input": "q", "output": "Paris.", "context": ["Paris is the capital of France."]}


@pytest.mark.parametrize("text, secret", [
    ("HTTP 401 from https://alice:s3cr3t-pass@judge.example/v1: denied", "s3cr3t-pass"),
    ("https://TOKENONLY123@judge.example/v1", "TOKENONLY123"),
    ("GET https://h.example/v1?api-version=1&key=AIzaQueryKey42 failed", "AIzaQueryKey42"),
    ("https://h.example/v1?sig=abcdef012345&x=1", "abcdef012345"),
    ('{"headers": {"Authorization": "Bearer opaque-token-98765"}}', "opaque-token-98765"),
    ("authorization: Basic YWxpY2U6c2VjcmV0cGFzcw==", "YWxpY2U6c2VjcmV0cGFzcw=="),
    ("x-api-key: plainkey-777777", "plainkey-777777"),
    ("your key sk-proj-abcdefghijklmnop1234 is invalid", "sk-proj-abcdefghijklmnop1234"),
    # a password holding an unescaped @ (the userinfo ends at the last @ of the authority)
    ("HTTP 401 from https://user:p@ss-w0rd@host.example/v1", "ss-w0rd"),
    ("X-Auth-Token: tok-abcdef123456", "tok-abcdef123456"),
    ('{"Private-Token": "pt-abcdefghij0123"}', "pt-abcdefghij0123"),
    # keys known by their shape, whoever holds them (GitHub, Hugging Face, AWS, Slack,
    # Google, GitLab): the shapes secret scanners look for
    ("clone failed with ghp_" + "A1b2" * 9, "ghp_" + "A1b2" * 9),
    ("github_pat_11ABCDEFG0" + "x" * 40, "github_pat_11ABCDEFG0" + "x" * 40),
    ("HF_HUB said hf_" + "aBcD" * 9 + " is invalid", "hf_" + "aBcD" * 9),
    ("AKIAABCDEFGHIJKLMNOP denied", "AKIAABCDEFGHIJKLMNOP"),
    ("xoxb-123456789012-abcdefghijklmnop", "xoxb-123456789012-abcdefghijklmnop"),
    ("key=AIza" + "Sy0123456789abcdefghijklmnopqrstuvw" + " rejected",
     "AIza" + "Sy0123456789abcdefghijklmnopqrstuvw"),
    ("glpat-abcdefghij0123456789 expired", "glpat-abcdefghij0123456789"),
])
def test_the_secret_class_is_masked_in_any_text(text, secret):
    masked = mask(text)
    assert secret not in masked and masked != text


def test_ordinary_query_parameters_stay():
    url = "https://h/v1?author=Bob&keyword=x&api-version=2&apiKey=K1&X-Amz-Signature=S2"
    assert mask(url) == "https://h/v1?author=Bob&keyword=x&api-version=2&apiKey=***" \
                       "&X-Amz-Signature=***"


def test_secret_env_values_and_registered_values_are_masked(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "value-of-the-env-key")
    monkeypatch.setenv("JUDGE_CREDS", "not-secret-named-1")  # not by name ...
    assert mask("got value-of-the-env-key back") == f"got {REDACTED} back"
    monkeypatch.setenv("MY_SERVICE_API_KEY", "the-rotated-env-key")  # a changed value counts
    assert mask("the-rotated-env-key") == REDACTED
    assert mask("not-secret-named-1") == "not-secret-named-1"
    register_url("https://bobby:pa%24%24word@h.example/v1?token=qtok-12345")
    assert mask("bobby") == "bobby"  # a user name beside a password is no secret
    assert "pa$$word" not in mask("the password pa$$word and qtok-12345 echoed")
    assert "qtok-12345" not in mask("the password pa$$word and qtok-12345 echoed")
    assert mask('{"reasoning": "fine", "score": 0.5}') == '{"reasoning": "fine", "score": 0.5}'


def test_trees_and_overrides(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    tree = {"judges": {"j": {"api_key": "literal-key-123", "api_key_env": "OPENAI_API_KEY",
                             "api_base": "https://u:pw-123456@h/v1", "note": f"uses {KEY}"}}}
    out = mask_tree(tree)["judges"]["j"]
    assert out["api_key"] == REDACTED and out["api_key_env"] == "OPENAI_API_KEY"
    assert "pw-123456" not in out["api_base"] and KEY not in out["note"]
    assert is_secret_name("LANGFUSE_SECRET_KEY") and not is_secret_name("max_tokens")
    assert is_secret_name("X-Auth-Token") and is_secret_name("Private-Token")
    assert not is_secret_name("max-tokens") and not is_secret_name("tokenizer")
    assert mask_override("+judges.j.api_key=abc123") == f"+judges.j.api_key={REDACTED}"


def test_secret_overrides_go_through_the_environment():
    argv = ["-m", "+experiment=x", "judges.h.model=openai/a,openai/b",
            "judges.h.api_base=https://u:k-123456@h1/v1,http://plain/v1",
            "+judges.h.api_key=abc123456"]
    out = hide_secret_overrides(argv)
    assert out[:3] == argv[:3]
    assert out[3] == "judges.h.api_base=${oc.env:EVALKIT_SECRET_OVERRIDE_0},http\\://plain/v1"
    assert out[4] == "+judges.h.api_key=${oc.env:EVALKIT_SECRET_OVERRIDE_1}"
    env = os.environ
    assert env["EVALKIT_SECRET_OVERRIDE_0"] == "https://u:k-123456@h1/v1"
    assert mask("abc123456") == REDACTED  # any length: it was a secret override
    assert hide_secret_overrides(["+judges.h.api_key=null"]) == ["+judges.h.api_key=null"]


def test_a_query_string_stays_after_the_path():
    url, userinfo, shown = chat_url("https://a:b@h.example/openai/v1/?api-version=2024&key=K1")
    assert url == "https://h.example/openai/v1/chat/completions?api-version=2024&key=K1"
    assert userinfo == "a:b" and shown == "https://h.example/openai/v1/chat/completions"


def test_query_and_userinfo_reach_the_server_right_and_stay_out_of_errors(ctx_dir, server):
    base = f"http://judge:pw-s3cret@127.0.0.1:{server.port}/v1?api-version=7&key=QKEY-9876"
    [row] = judge(make(HallucinationLlmJudge, ctx_dir, None, api_base=base), records(ROW))
    assert row["status"] == "ok"
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["query"] == {
        "api-version": "7", "key": "QKEY-9876"}
    assert sent["headers"]["Authorization"] == "Basic " + base64.b64encode(
        b"judge:pw-s3cret").decode()
    server.push(Reply(status=401, body=f'{{"error": "bad key QKEY-9876 for judge:pw-s3cret, '
                                       f'Authorization: {sent["headers"]["Authorization"]}"}}'))
    [row] = judge(make(HallucinationLlmJudge, ctx_dir, None, api_base=base, cache=False),
                  records(ROW))
    assert row["status"] == "error" and row["error_cause"] == "client_error"
    for secret in ("QKEY-9876", "pw-s3cret", sent["headers"]["Authorization"].split()[1]):
        assert secret not in row["error"] and secret not in (row["exchange"] or "")
    assert "http://127.0.0.1" in row["error"]


def test_a_key_echoed_in_an_answer_is_not_stored(ctx_dir, server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.push(Reply(content=f'{{"reasoning": "your key is {KEY}", "score": 0.5}}'))
    j = make(HallucinationLlmJudge, ctx_dir, server, api_key_env="OPENAI_API_KEY")
    [row] = judge(j, records(ROW))
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert row["status"] == "ok" and row["value"] == 0.5
    for field in ("raw", "explanation", "exchange"):
        assert KEY not in row[field] and REDACTED in row[field]
    # the cached answer (committed as it arrived) is masked too
    for path in ctx_dir.cache_dir.iterdir():
        assert KEY.encode() not in path.read_bytes()
