"""Names that come from data (input ids, model names, bench and profile names) and the file and key
names made from them.

Ids and model names are data, never path fragments. Every file name made from one goes through
:func:`file_name`, an injective mapping onto names that are safe on every file system and in every
object store: a name of plain characters (``[A-Za-z0-9][A-Za-z0-9._+-]*``, at most 100 characters,
not ending in a dot) stays as it is; any other name becomes ``~`` followed by its percent-encoded
UTF-8 (or, when that would be long, ``~~`` and its SHA-256). ``~`` never starts a plain name, so two
different names never share a file, whatever an adversary chooses. A file of one of several
samples of an input (or of a model's videos) is :func:`sample_file_name`: the name's file name, ``!``
and the sample's; no :func:`file_name` holds ``!``, so it never meets another sample's file or the
file of a single video.

What each kind of name may contain:

* an **input id**: 1-200 characters, no control characters, not blank, not starting with ``!``
  (:func:`line_key`: the rows of manifest lines that are not inputs are keyed ``!line-<n>``, so a
  bad line never takes a valid input's key);
* a **model name** (a folder of the candidate store, and a Dagster partition key): 1-100
  characters, no control characters, no ``| , [ ]`` (Dagster's multi-partition separators), no
  ``...`` (its range separator), no ``* ?`` (polars reads a stored table's path as a glob, so
  ``a*`` would read ``ab``'s table too), no ``/`` or ``\\``, and no leading or trailing space;
* a **bench** or **profile** name: letters, digits and ``_ . = + -`` (each evaluation has an
  instance of its own, so neither enters a Dagster name). A bench name from ``bench.json`` or ``--name`` is held to
  this where it enters (:func:`~argus_dagster.infra.settings.bench_name`); a bench named after its folder
  keeps the folder's name. No bench takes a name of the home's own files (:data:`RESERVED_BENCH_NAMES`,
  ``index.html``). Every command the CLI prints for a user to copy is shell-quoted.

Text from outside (a manifest line, a file or folder name, a judge's answer, an ``ARGUS_*`` setting)
is held to :func:`text_problem` where it enters: text that no UTF-8 writer can encode is refused there,
on its own row, and never reaches a table, a hash or a page. A name refused so is shown with
:func:`shown` (its undecodable bytes as ``\\xff``), so the message itself can always be printed.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from urllib.parse import quote

PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")
MAX_ID = 200
MAX_MODEL = 100
FORBIDDEN_IN_MODEL = ("|", ",", "[", "]", "...", "*", "?", "/", "\\")
PROFILE_OR_BENCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]{0,63}")


def text_problem(text: str) -> str | None:
    """Why ``text`` from outside cannot be used as text, or None.

    Python holds the bytes of a file name or setting that are not UTF-8 as lone surrogates
    (``os.fsdecode``'s U+DC80-U+DCFF), and ``json.loads`` makes one of a ``"\\ud800"`` escape without
    its pair: no UTF-8 writer (a parquet table, SQLite, a page) and no hash of the text can encode
    either, so such text is refused where it enters, never carried on to fail a whole run."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not UTF-8 text (character {exc.start + 1} is a lone surrogate, U+{ord(text[exc.start]):04X})"
    return None


def json_text_problem(value: object) -> str | None:
    """:func:`text_problem` of the first string in a parsed JSON ``value`` (its keys included) that
    has one, prefixed by the field that holds it (``field 'prompt': ...``); None when every string is
    text. Walked without recursion: a value nested as deep as the JSON parser allows is read whole."""
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        where, item = stack.pop()
        field = where if len(where) <= 80 else where[:77] + "..."
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"field {field!r}: {problem}" if where else problem
        elif isinstance(item, dict):
            for key in item:
                problem = text_problem(str(key))
                if problem:
                    return f"a field name in {field!r}: {problem}" if where else f"a field name: {problem}"
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def shown(text: str) -> str:
    """``text`` as a message may print it: a name's bytes that are not UTF-8 as ``\\xff``, a lone
    surrogate of any other kind as ``\\ud800``; valid text as it is."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in text)


def is_plain(name: str) -> bool:
    return bool(PLAIN.fullmatch(name)) and not name.endswith(".")


def file_name(name: str) -> str:
    """An injective, file-system-safe name for ``name`` (see the module docstring)."""
    if is_plain(name):
        return name
    encoded = quote(name, safe="")
    if len(encoded) <= 150:
        return "~" + encoded
    return "~~" + hashlib.sha256(name.encode("utf-8")).hexdigest()


FOLDER_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+,-]{0,99}")


def folder_name(name: str) -> str:
    """The folder of a bench or an evaluator profile (``judge=Qwen/Qwen2.5-VL-72B,vlm-only``): the name
    itself when it is made of letters, digits and ``. _ = + , -``; otherwise its safe characters, ``~``
    and 12 hex digits of its SHA-256 (injective: no name kept as it is holds ``~``). Never a ``%``:
    the folder holds the evaluation's SQLite instance, whose URL a percent-encoded path would break."""
    if FOLDER_SAFE.fullmatch(name) and not name.endswith("."):
        return name
    slug = re.sub(r"[^A-Za-z0-9._=+,-]+", "-", name).strip(".-")[:60]
    return f"{slug}~{hashlib.sha256(name.encode('utf-8')).hexdigest()[:12]}"


def sample_file_name(name: str, sample: str = "") -> str:
    """The file name for sample ``sample`` of ``name``: :func:`file_name` for the single video
    (``sample`` empty), else ``<file_name(name)>!<file_name(sample)>``; injective in the pair."""
    return f"{file_name(name)}!{file_name(sample)}" if sample else file_name(name)


def is_single_component(name: str) -> bool:
    """Whether ``name`` names an entry of one folder: not empty, ``.`` or ``..``, no separator, no NUL.

    A folder joined with such a name (and a suffix) stays in that folder, whatever the name holds.
    """
    return bool(name) and name not in (".", "..") and not any(c in name for c in ("/", "\\", "\0"))


def lookup_names(name: str) -> list[str]:
    """The file stems under which data named ``name`` may be found in a folder: its own name when
    that is a single folder entry (released benches name rubrics and videos by id), then its
    :func:`file_name`. Never a name that leaves the folder."""
    out = [name] if is_single_component(name) else []
    safe = file_name(name)
    return out + ([safe] if safe not in out else [])


ERROR_ROW_MARK = "!"


def line_key(line_no: int) -> str:
    """The key of the row of manifest line ``line_no`` when that line gives no valid id: no valid input
    id starts with :data:`ERROR_ROW_MARK`, so the key never collides with an input's."""
    return f"{ERROR_ROW_MARK}line-{line_no}"


def input_id_problem(value: object) -> str | None:
    """Why ``value`` cannot be an input id, or None."""
    if not isinstance(value, str):
        return f"the id must be a string, got {type(value).__name__}"
    if not value.strip():
        return "the id is empty"
    if value.startswith(ERROR_ROW_MARK):
        return f"the id starts with {ERROR_ROW_MARK!r} (kept for the rows of bad manifest lines)"
    if len(value) > MAX_ID:
        return f"the id has {len(value)} characters (at most {MAX_ID})"
    if _has_control(value):
        return "the id contains control characters"
    problem = text_problem(value)
    return problem and f"the id is {problem}"


def model_name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a model name (a candidate-store folder and partition key), or None."""
    if not value or not value.strip():
        return "the model name is empty"
    if value != value.strip():
        return "the model name starts or ends with a space"
    if len(value) > MAX_MODEL:
        return f"the model name has {len(value)} characters (at most {MAX_MODEL})"
    if _has_control(value):
        return "the model name contains control characters"
    problem = text_problem(value)
    if problem:
        return f"the model name is {problem}"
    bad = [s for s in FORBIDDEN_IN_MODEL if s in value]
    if bad:
        return f"the model name contains {' and '.join(repr(s) for s in bad)} (not allowed: | , [ ] ... * ? / \\)"
    if value in (".", ".."):
        return "the model name is a relative folder name"
    return None


def profile_or_bench_problem(value: str, what: str = "name") -> str | None:
    if not PROFILE_OR_BENCH.fullmatch(value or ""):
        return (f"{what} {value!r}: use letters, digits and _ . = + - (at most 64 characters, "
                "starting with a letter or digit)")
    return None


# The home's own files beside the benches' folders in ``$ARGUS_HOME/benches``: the index of every
# evaluation. A bench whose folder would take one of these names is refused (compared without case:
# a case-insensitive file system holds one of ``index.html`` and ``INDEX.HTML``).
RESERVED_BENCH_NAMES = ("index.html",)


def reserved_bench_problem(name: str) -> str | None:
    """Why ``name`` cannot be a bench's name because its folder would be one of the home's own files,
    or None."""
    if folder_name(name).lower() in RESERVED_BENCH_NAMES:
        return (f"the bench name {name!r} is reserved ($ARGUS_HOME/benches/{folder_name(name)} is the home's index "
                "of evaluations)")
    return None


