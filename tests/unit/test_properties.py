"""The one .properties writer and reader (``_clientconf.format_properties`` /
``properties_entries``, javaproperties underneath) against java.util.Properties itself: what the plugin writes for
Kafka's brokers, MM2 and MM1 is read back by Java exactly, whatever the characters."""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_kafka_mirror._clientconf import format_properties, parse_properties_text
from pytest_kafka_mirror.replicators.mm2 import parse_properties

TRICKY = {
    "source->target.topics": r"^km\-a\..*",
    "x": " leading blank",
    "y": "#not a comment",
    "key with = and : and space": "v",
    "!bang": "\ttab\nnewline\rreturn\fformfeed",
    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
                        'password="pä$$wörd€😀";',
    "trailing": "blanks kept   ",
    "empty": "",
    "back\\slash": "ends in a backslash \\",
    "ünïcode.kéy": "ünïcode välue",
}

# Kafka's Utils.loadProps: Properties.load(InputStream), i.e. ISO 8859-1 with \uXXXX escapes
LOADER = """
import java.io.*;
import java.util.*;
public class Load {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        try (InputStream in = new FileInputStream(args[0])) { p.load(in); }
        TreeMap<String, String> sorted = new TreeMap<>();
        for (String k : p.stringPropertyNames()) sorted.put(k, p.getProperty(k));
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, String> e : sorted.entrySet())
            out.append(hex(e.getKey())).append(' ').append(hex(e.getValue())).append('\\n');
        System.out.print(out);
    }
    static String hex(String s) {
        StringBuilder b = new StringBuilder("=");
        for (char c : s.toCharArray()) b.append(String.format("%04x", (int) c));
        return b.toString();
    }
}
"""


def _utf16_hex(text: str) -> str:
    return "=" + text.encode("utf-16-be", "surrogatepass").hex()


def _java_reads(tmp_path: Path, text: str) -> dict[str, str]:
    """What java.util.Properties reads from ``text`` (as UTF-16 hex, compared as such)."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH: java.util.Properties cannot be asked")
    (tmp_path / "Load.java").write_text(LOADER)
    path = tmp_path / "p.properties"
    path.write_bytes(text.encode("ascii"))  # everything outside printable ASCII is escaped
    out = subprocess.run([java, str(tmp_path / "Load.java"), str(path)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return dict(line.split(" ") for line in out.splitlines())


def test_java_reads_back_exactly_what_was_written(tmp_path: Path) -> None:
    rng = random.Random(7)
    alphabet = [chr(c) for c in range(0x20, 0x7F)] + list("\t\n\r\f\\=:#! äé€😀\u2028\x85\x1c")
    generated = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))):
                 "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20))) for _ in range(200)}
    props = {**TRICKY, **generated}
    text = format_properties(props)
    assert _java_reads(tmp_path, text) == {_utf16_hex(k): _utf16_hex(v) for k, v in props.items()}
    assert parse_properties(text) == props


# No deadline: the first call imports javaproperties (0.2-0.6 s on a loaded machine), which a
# wall-clock limit would time, not the round trip; figures are never wall-clock asserts here.
@settings(deadline=None)
@given(st.dictionaries(st.text(min_size=1), st.text(), max_size=8))
def test_the_reader_inverts_the_writer(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props)) == props


def test_what_java_reads_leniently_the_plugin_reads_alike(tmp_path: Path) -> None:
    text = ("a\n"  # a key alone: the empty value
            "b:c\n  d   e f  \n"  # ':' and blanks as separators; the value keeps its inner and trailing blanks
            "g = one \\\n    two\n"  # a continuation drops the next line's leading blanks
            "=no key\n"  # the empty key
            "h=\\u00e9\\q\n"  # \q is q
            "i=x\u2028y\x85z\r"  # only LF, CR and CR LF end a line
            "j=last")
    ascii_text = text.encode("ascii", "backslashreplace").decode().replace("\\x85", "\\u0085")
    assert _java_reads(tmp_path, ascii_text) == {_utf16_hex(k): _utf16_hex(v) for k, v in
                                                parse_properties(text).items()}
    assert parse_properties(text) == {"a": "", "b": "c", "d": "e f  ", "g": "one two", "": "no key", "h": "éq",
                                      "i": "x\u2028y\x85z", "j": "last"}


def test_client_properties_stay_strict() -> None:
    props = parse_properties_text("sasl.password = hunter2  \nsasl.username\tal ice\n", "f")
    assert dict(props) == {"sasl.password": "hunter2", "sasl.username": "al ice"}  # a value's edges trimmed
    with pytest.raises(ValueError, match="^f line 1 is not KEY=VALUE$"):
        parse_properties_text("=x\n", "f")
