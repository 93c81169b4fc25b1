import json

import pyarrow as pa
import pytest

from evalkit.analysis.echo import echo_similarity
from evalkit.analysis.echo_fast import echo_similarities
from evalkit.config import instance
from evalkit.errors import ConfigError
from evalkit.judges.prompt_echo import PromptEchoConfig, PromptEchoJudge
from evalkit.results.schemas import RECORDS, conform

SYSTEM = "Extract the fields as JSON with keys name, city and date. Output only JSON."
USER = "Maria Keller will arrive in Zurich on 2026-03-14 for the audit."
CHAT = json.dumps([{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}])


@pytest.mark.parametrize("output, expected", [
    (USER, 1.0),  # the user message verbatim
    (f"{SYSTEM}\n{USER}", 1.0),  # the whole prompt
    (USER.upper() + "  ", 1.0),  # case and spacing do not hide an echo
    ("yes", 0.0),  # short answers made of prompt words are not echoes
    ("Zurich", 0.0),
    ("", 0.0),
    ("🙂🙂🙂", 0.0),  # no words at all
])
def test_similarity_cases(output, expected):
    assert echo_similarity(output, CHAT) == pytest.approx(expected)


def test_structured_answer_built_from_prompt_words_is_not_an_echo():
    # JSON output contributes its values: "maria keller zurich 2026 03 14"; only the date
    # trigram also occurs in the prompt
    out = '{"name": "Maria Keller", "city": "Zurich", "date": "2026-03-14"}'
    assert echo_similarity(out, CHAT) == pytest.approx(0.25)


def test_partial_copy_is_between_zero_and_one():
    out = USER + " The extracted name is Maria Keller and the date is in March."
    value = echo_similarity(out, CHAT)
    assert 0.2 < value < 0.9


def test_word_boundaries_and_short_whole_prompt():
    assert echo_similarity("at", "cat sat on the mat") == 0.0
    assert echo_similarity("hello there", "Hello there!") == 1.0
    assert echo_similarity("Bonjour à tous les amis", "Dites: « bonjour à tous les amis »") == 1.0


def test_huge_output_is_fast_enough_and_correct():
    prompt = " ".join(f"word{i}" for i in range(2000))
    assert echo_similarity(prompt * 20, prompt) > 0.9
    assert echo_similarity("novel text " * 50_000, prompt) == 0.0


def test_judge_batch_null_output_is_an_error():
    table = conform([{"record_id": "a", "input": CHAT, "output": USER},
                     {"record_id": "b", "input": CHAT, "output": "Maria goes to Zurich."},
                     {"record_id": "c", "input": CHAT, "output": None},
                     {"record_id": "d", "input": None, "output": "no prompt at all"}], RECORDS)
    rows = PromptEchoJudge("e", PromptEchoConfig(), None).judge(table).to_pylist()
    assert [r["label"] for r in rows] == ["echo", "no_echo", None, "no_echo"]
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "ok"]
    assert rows[2]["error"] == "output is null: nothing to compare"
    assert rows[0]["passed"] is False and rows[0]["value"] == 1.0


def test_against_other_columns():
    table = conform([{"record_id": "a", "input": "q", "reference": "The reference answer here",
                      "output": "The reference answer here"}], RECORDS)
    judge = PromptEchoJudge("e", PromptEchoConfig(against=["input", "reference"]), None)
    assert judge.judge(table).column("value").to_pylist() == [1.0]


def test_bad_config():
    with pytest.raises(ConfigError, match="threshold"):
        instance("judges", "e", {"plugin": "prompt_echo", "threshold": 2}, "judges.e")
    with pytest.raises(ConfigError, match="judges.e.against: 'latency_s' not a text record"):
        instance("judges", "e", {"plugin": "prompt_echo", "against": ["latency_s"]}, "judges.e")


def test_each_distinct_pair_is_compared_once_with_the_same_result_as_alone():
    """Rows repeat (a model answering a prompt it saw before): one comparison per distinct
    (output, prompt) pair, the same value as comparing the row alone; null output -> None,
    null prompt -> 0, and the best of two prompt columns wins."""
    outputs = [CHAT, "the cat sat on the mat", None, "the cat sat on the mat", "novel text",
               "hello there", CHAT]
    first = [CHAT, "a cat sat on the mat today", "x", None, "novel text", "Hello there!", CHAT]
    second = ["zzz", "zzz", "zzz", "the cat sat on the mat", "zzz", "zzz", "zzz"]
    got = echo_similarities(pa.array(outputs, pa.string()),
                            [pa.array(first, pa.string()), pa.array(second, pa.string())])
    alone = [None if o is None else max(echo_similarity(o, p) if p else 0.0
                                        for p in (a, b))
             for o, a, b in zip(outputs, first, second, strict=True)]
    assert got == pytest.approx(alone)
    assert got[2] is None and got[0] == got[6] == 1.0 and got[3] == 1.0


def test_normalising_on_threads_gives_the_same_text(monkeypatch):
    import evalkit.analysis.echo_fast as pe

    texts = pa.array([CHAT, "Plain TEXT, with punctuation!", None, '{"answer": "Yes"}',
                      "Ünïcödé wörds « here »", "", "[1, 2]"] * 3, pa.string())
    alone = pe.normalise(texts)
    monkeypatch.setattr(pe, "_SPLIT_MIN", 2)
    monkeypatch.setattr(pe.os, "cpu_count", lambda: 3)
    assert pe.normalise(texts).equals(alone)
    assert alone.to_pylist()[:3] == [alone[0].as_py(), "plain text with punctuation", None]


def test_ascii_fast_path_gives_the_regex_words():
    """ASCII cells skip the regex (a byte table and numpy); the words must be those of the
    Unicode-aware regex, for every ASCII byte, mixed with non-ASCII and null cells, on a
    slice of a larger array and on large_string."""
    import random

    import pyarrow.compute as pc

    import evalkit.analysis.echo as definition
    import evalkit.analysis.echo_fast as pe

    rng = random.Random(7)
    alphabet = [chr(c) for c in range(128)] + ["é", "Ü", "ß", "🙂", "\u00a0", "١"]
    cells = []
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        cells.append(None if rng.random() < 0.05 else
                     json.dumps([{"role": "user", "content": text}]) if rng.random() < 0.3
                     else text)
    for texts in (pa.array(cells, pa.string()).slice(11, 2500),
                  pa.array(cells, pa.large_string())):
        is_json = pc.fill_null(pc.match_substring_regex(texts, definition.JSON_LIKE), False)
        stripped = pc.if_else(
            is_json, pc.replace_substring_regex(texts, definition.JSON_NOISE, " "), texts)
        regex = pc.utf8_trim(pc.replace_substring_regex(
            pc.utf8_lower(stripped), definition.NON_WORD, " "), characters=" ")
        assert pe._normalise_distinct(texts).to_pylist() == regex.to_pylist()


def test_non_ascii_cells_give_the_regex_words_for_every_code_point():
    """Cells with non-ASCII characters are lower-cased, their non-ASCII non-word characters
    replaced, and the byte table does the rest: the words must be the Unicode regex's for
    every code point (a letter that lower-cases to two, a sign that lower-cases to ASCII, a
    mark, a space, an emoji), next to ASCII letters, digits, punctuation and each other."""
    import pyarrow.compute as pc

    import evalkit.analysis.echo as definition
    import evalkit.analysis.echo_fast as pe

    points = [chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    cells = ["".join(f"a{p}-{p}{p} 1{p}" for p in points[i:i + 40]) + " Ü"
             for i in range(0, len(points), 40)]
    texts = pa.array(cells, pa.string())
    regex = pc.utf8_trim(pc.replace_substring_regex(pc.utf8_lower(texts), definition.NON_WORD, " "),
                         characters=" ")
    assert pe._normalise_distinct(texts).to_pylist() == regex.to_pylist()


def test_rows_taken_as_their_own_cells_give_the_deduplicated_values(monkeypatch):
    """A column whose sampled rows are (almost) all distinct skips the hashing for repeats;
    the values are those of the deduplicated comparison, with repeats, nulls and short
    outputs (which read their raw prompt) among the rows."""
    import random

    import numpy as np

    import evalkit.analysis.echo_fast as pe

    rng = random.Random(4)
    prompts = [None if i % 17 == 0 else CHAT if i % 97 == 0 else
               f"Case {i}: summarise the report about item {i % 40} please" for i in range(600)]
    outputs = [None if i % 13 == 0 else "yes" if i % 7 == 0 else
               rng.choice(["summarise the report about item 3 please", "I can't help.",
                           f"case {i} summarise the report about item {i % 40}"])
               for i in range(600)]
    out, src = pa.array(outputs, pa.string()), pa.array(prompts, pa.string())
    monkeypatch.setattr(pe, "_SAMPLE", 10**6)  # never enough rows: always deduplicated
    deduplicated = pe.echo_values(out, [src, out])
    for sample in (64, 600):  # rows taken as their own cells (prompts; outputs repeat)
        monkeypatch.setattr(pe, "_SAMPLE", sample)
        cells, idx = pe._cells(src)
        assert cells is src and np.isnan(idx).sum() == src.null_count
        assert np.array_equal(pe.echo_values(out, [src, out]), deduplicated, equal_nan=True)
    assert len(pe._cells(out)[0]) < len(out)  # repeated outputs are still deduplicated


def test_short_and_long_outputs_share_the_same_n_gram_value(monkeypatch):
    """An output of few words counts its n-grams by substring search in the prompt, a
    longer one by set intersection: both give the same share on partial copies, repeats,
    and words that are prefixes or suffixes of the prompt's words."""
    import random

    import evalkit.analysis.echo_fast as pe

    rng = random.Random(7)
    vocab = ["the", "then", "he", "a", "at", "cat", "cats", "sat", "mat", "on", "one", "x"]
    prompts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(3, 60)))
               for _ in range(300)]
    outputs = []
    for p in prompts:
        words = p.split()
        k = rng.randint(0, len(words) - 1)
        outputs.append(" ".join(words[k:k + rng.randint(1, 12)]
                                + [rng.choice(vocab) for _ in range(rng.randint(0, 12))]))

    def values(few_words):
        monkeypatch.setattr(pe, "_FEW_WORDS", few_words)
        return pe.echo_similarities(pa.array(outputs, pa.string()),
                                    [pa.array(prompts, pa.string())], probe=1000)

    searched, intersected = values(10_000), values(0)
    assert searched == intersected
    assert 0.0 < sum(searched) < len(searched) and len(set(searched)) > 10
