"""A token's value in a `run.shell` script is one word of data wherever the token sits (spec/shell_quote.py).

Each case renders a script with `resolve_shell` and runs it with the real `bash -c` a step runs with: the value
must come back exactly, as one word, and nothing it spells may run (every case would create `PWNED` if it ran)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from npa_workflow.spec.tokens import TokenContext, TokenError, resolve_shell

# Every class of shell metacharacter, and values that end quotes or here-documents.
HOSTILE = [
    "plain", "two words", "", "  spaced  ", "$(touch PWNED)", "`touch PWNED`", "x; touch PWNED", "x | touch PWNED",
    "x && touch PWNED", "x & touch PWNED", "x || touch PWNED", "'; touch PWNED; '", '"; touch PWNED; "',
    "a\ntouch PWNED", "a\r\ntouch PWNED", "*", "?", "[a-z]*", "> PWNED", ">> PWNED", "< /etc/passwd",
    "2>PWNED", "\\", "\\'", "'\\''", "$HOME", "${HOME}", "$((1+1))", "!!", "~", "~root", "#c", "{a,b}", "%s %d",
    "$'\\x41'", "\\$(touch PWNED)", "\")\"; touch PWNED; \"", "EOF", "a\x00b"[:1] + "b", "tab\there", "ünïcödé ✓",
    "-n", "--", "(touch PWNED)", "{ touch PWNED; }",
]

# (script, the text bash prints for a value v)
PLACES = [
    ("printf '<%s>\\n' {{config.v}}", lambda v: f"<{v}>\n"),
    ("printf '<%s>\\n' pre{{config.v}}post", lambda v: f"<pre{v}post>\n"),
    ("printf '<%s>\\n' \"pre {{config.v}} post\"", lambda v: f"<pre {v} post>\n"),
    ("printf '<%s>\\n' 'pre {{config.v}} post'", lambda v: f"<pre {v} post>\n"),
    ("printf '<%s>\\n' $'pre {{config.v}} post'", lambda v: f"<pre {v} post>\n"),
    ("printf '<%s>\\n' \"$(printf '%s' {{config.v}})\"", lambda v: f"<{v.rstrip(chr(10))}>\n"),
    ("printf '<%s>\\n' \"$(printf '%s' '{{config.v}}')\"", lambda v: f"<{v.rstrip(chr(10))}>\n"),
    ("printf '<%s>\\n' \"$(printf '%s' \"{{config.v}}\")\"", lambda v: f"<{v.rstrip(chr(10))}>\n"),
    ("x=( {{config.v}} ); printf '<%s>\\n' \"${x[@]}\"", lambda v: f"<{v}>\n"),
    ("x={{config.v}}; printf '<%s>\\n' \"$x\"", lambda v: f"<{v}>\n"),
    ("cat <<EOF\npre {{config.v}} post\nEOF", lambda v: f"pre {v} post\n"),
    ("cat <<'EOF'\npre {{config.v}} post\nEOF", lambda v: f"pre {v} post\n"),
    ("cat <<-EOF\n\tpre {{config.v}}\n\tEOF", lambda v: f"pre {v}\n"),
    ("true # {{config.v}}\nprintf done", lambda v: "done"),
    ("printf '<%s>\\n' {{config.v}} # the value {{config.v}}", lambda v: f"<{v}>\n"),
]


def run_bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, timeout=10)  # bytes: \r kept
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))


def shell(template: str, **config: object) -> str:
    return resolve_shell(template, TokenContext(config=config, run={"id": "r1"}))


@pytest.mark.parametrize(("template", "expected"), PLACES, ids=[t for t, _ in PLACES])
def test_every_value_is_one_word_of_data_wherever_its_token_sits(template, expected, tmp_path):
    ran_wrong = []
    for value in HOSTILE:
        script = shell(template, v=value)
        done = run_bash(script, tmp_path)
        if (tmp_path / "PWNED").exists() or done.stdout != expected(value):
            ran_wrong.append((value, script, done.stdout, done.stderr))
            (tmp_path / "PWNED").unlink(missing_ok=True)
    assert not ran_wrong


def test_a_plain_value_is_written_as_it_is():
    assert shell("train --lr {{config.lr}} --out s3://bkt/{{config.k}}", lr="0.01", k="a/b") == \
        "train --lr 0.01 --out s3://bkt/a/b"
    assert shell('echo "{{config.x}}"', x="a b") == 'echo "a b"'


def test_non_string_values_are_json_scalars_and_one_word():
    assert shell("f {{config.t}} {{config.n}} {{config.none}}", t=True, n=3, none=None) == "f true 3 ''"


@pytest.mark.parametrize("value", ["x\nEOF\ntouch PWNED", "EOF"])
def test_a_value_that_would_end_a_here_document_early_is_refused(value):
    with pytest.raises(TokenError, match="would end the here-document 'EOF' early"):
        shell("cat <<EOF\n{{config.v}}\nEOF", v=value)


@pytest.mark.parametrize(("template", "where"), [
    ("echo `echo {{config.v}}`", "inside `…`"),
    ("echo ${X:-{{config.v}}}", "inside ${…}"),
    ("echo $(( {{config.v}} + 1 ))", "inside an arithmetic"),
    ("(( {{config.v}} > 1 )) && echo y", "inside an arithmetic"),
    ("echo \\{{config.v}}", "right after a backslash"),
])
def test_places_no_quoting_protects_take_only_plain_values(template, where, tmp_path):
    assert run_bash(shell(template, v="12"), tmp_path).returncode == 0  # a plain value is fine there
    with pytest.raises(TokenError) as caught:
        shell(template, v="a[$(touch PWNED)]")
    assert where in caught.value.message and "{{config.v}}" in caught.value.message
    assert "{{config.v|raw}}" in caught.value.hint


def test_raw_puts_shell_syntax_in_as_is_and_the_rest_is_still_quoted(tmp_path):
    script = shell("{{config.cmd|raw}} \"{{config.msg}}\" > out.txt; printf '<%s>' {{config.msg}}",
                   cmd="printf '%s|'", msg="$(touch PWNED)")
    done = run_bash(script, tmp_path)
    assert (tmp_path / "out.txt").read_text() == "$(touch PWNED)|"
    assert done.stdout == "<$(touch PWNED)>" and not (tmp_path / "PWNED").exists()
    # A raw value that opens a quote changes where the next token sits, and that one is quoted for its place.
    opened = shell("printf '<%s>' {{config.q|raw}}{{config.msg}}\"", q='"', msg="$(touch PWNED)")
    assert run_bash(opened, tmp_path).stdout == "<$(touch PWNED)>" and not (tmp_path / "PWNED").exists()


def test_raw_is_a_known_transform_and_base64_output_needs_no_quotes():
    assert shell("echo {{config.v|base64}}", v="a b; c") == "echo YSBiOyBj"
    with pytest.raises(TokenError, match="unsupported token transform 'shell'"):
        shell("echo {{config.v|shell}}", v="x")
