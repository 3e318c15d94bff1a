"""Parse JUnit XML reports written by verifiers (pytest ``--junitxml``, surefire, …).

The report is the candidate's evidence, so it is read defensively:

* counts come from the ``<testcase>`` elements, never from the ``tests=`` / ``failures=``
  attributes of the suites (those are forgeable and often inconsistent);
* documents with a DTD or entity declarations are refused (billion laughs, external
  entities): a JUnit report never needs one;
* anything that is not a well-formed ``<testsuites>`` / ``<testsuite>`` document raises
  :class:`JUnitError` with a reason, and nothing else.

Test ids are ``classname::name`` (``tests.test_x.TestA::test_b`` for pytest) or the bare
``name``; :meth:`JUnitReport.find_all` also resolves pytest node ids
(``tests/test_x.py::TestA::test_b``).
"""

from __future__ import annotations

import codecs
import re
import xml.etree.ElementTree as ET
from typing import Literal

from pydantic import PrivateAttr

from harness.errors import HarnessError
from harness.frozen import Frozen as _Frozen

__all__ = ["JUnitCase", "JUnitError", "JUnitReport", "JUnitStatus", "parse_junit"]

JUnitStatus = Literal["passed", "failed", "error", "skipped"]

_FORBIDDEN = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
_DECL_ENCODING = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]{1,40})["']""")
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Child elements that make a test case non-passing, in order of precedence.
_STATUS_TAGS: tuple[tuple[str, JUnitStatus], ...] = (
    ("failure", "failed"),
    ("error", "error"),
    ("skipped", "skipped"),
)


class JUnitError(HarnessError, ValueError):
    """A JUnit report is malformed, unsafe (DTD/entities) or not a JUnit document."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"invalid JUnit XML: {reason}")
        self.reason = reason


class JUnitCase(_Frozen):
    """One ``<testcase>`` element."""

    classname: str
    """The ``classname`` attribute (dotted for pytest: ``tests.test_x.TestA``); may be empty."""
    name: str
    file: str | None = None
    """The ``file`` attribute, when the producer writes one."""
    status: JUnitStatus
    message: str = ""
    """``message`` attribute of the failure/error/skipped element."""
    text: str = ""
    """Text of the failure/error/skipped element (usually the traceback)."""

    @property
    def id(self) -> str:
        """``classname::name``, or the bare ``name`` when there is no classname."""
        return f"{self.classname}::{self.name}" if self.classname else self.name


class JUnitReport(_Frozen):
    """A parsed report. Every count is derived from :attr:`cases`."""

    tests: int
    failures: int
    errors: int
    skipped: int
    passed: int
    cases: tuple[JUnitCase, ...]
    _by_id: dict[str, list[JUnitCase]] = PrivateAttr(default_factory=dict)
    _by_name: dict[str, list[JUnitCase]] = PrivateAttr(default_factory=dict)
    _by_function: dict[str, list[JUnitCase]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: object, /) -> None:
        """Index the cases by id, by name and by parametrized function for :meth:`find_all`."""
        by_id: dict[str, list[JUnitCase]] = {}
        by_name: dict[str, list[JUnitCase]] = {}
        by_function: dict[str, list[JUnitCase]] = {}
        for case in self.cases:
            by_id.setdefault(case.id, []).append(case)
            by_name.setdefault(case.name, []).append(case)
            function, bracket, _ = case.name.partition("[")
            if bracket and function and case.name.endswith("]"):
                by_function.setdefault(f"{case.classname}::{function}", []).append(case)
        self._by_id = by_id
        self._by_name = by_name
        self._by_function = by_function

    @property
    def executed(self) -> int:
        """Tests that actually ran (everything but skipped)."""
        return self.tests - self.skipped

    def find_all(self, test_id: str) -> tuple[JUnitCase, ...]:
        """Every case matching ``test_id``.

        Tried in order: exact ``classname::name``; bare ``name``; a pytest node id
        (``path/to/test_x.py::TestA::test_b`` → classname ``path.to.test_x.TestA``).
        A test reported more than once (reruns, teardown errors) yields several cases.
        An id that names a function no case has as such names all of its parametrized
        instances (``test_b[1]``, ``test_b[2]``), which must then all meet what is asked of
        it: a test the case asks for may be written parametrized.
        """
        for found in (self._by_id.get(test_id), self._by_name.get(test_id)):
            if found:
                return tuple(found)
        converted = _nodeid_to_id(test_id)
        if converted is not None and self._by_id.get(converted):
            return tuple(self._by_id[converted])
        return tuple(self._by_function.get(converted or test_id, ()))

    def find(self, test_id: str) -> JUnitCase | None:
        """Return the first case matching ``test_id`` (see :meth:`find_all`), or ``None``."""
        found = self.find_all(test_id)
        return found[0] if found else None

    def not_passing(self) -> tuple[JUnitCase, ...]:
        """Cases that failed or errored (skipped ones are not counted here)."""
        return tuple(c for c in self.cases if c.status in ("failed", "error"))


def _nodeid_to_id(test_id: str) -> str | None:
    """``tests/test_x.py::TestA::test_b`` → ``tests.test_x.TestA::test_b`` (else None)."""
    parts = test_id.split("::")
    if len(parts) < 2 or not parts[0].endswith(".py"):
        return None
    module = parts[0][: -len(".py")].replace("\\", "/").strip("/").replace("/", ".")
    classname = ".".join([module, *parts[1:-1]])
    return f"{classname}::{parts[-1]}"


def _decode(data: bytes) -> str:
    """Decode the document ourselves so the safety check sees what the parser sees."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding)
    if data.startswith(b"<\x00\x00\x00"):
        return data.decode("utf-32-le")
    if data.startswith(b"\x00\x00\x00<"):
        return data.decode("utf-32-be")
    if data.startswith(b"<\x00"):
        return data.decode("utf-16-le")
    if data.startswith(b"\x00<"):
        return data.decode("utf-16-be")
    declared = _DECL_ENCODING.match(data.lstrip())
    encoding = declared.group(1).decode("ascii") if declared else "utf-8"
    return data.decode(encoding)


def _case(element: ET.Element) -> JUnitCase:
    status: JUnitStatus = "passed"
    message = ""
    text = ""
    for tag, tag_status in _STATUS_TAGS:
        child = element.find(tag)
        if child is not None:
            status = tag_status
            message = child.get("message", "")
            text = child.text or ""
            break
    return JUnitCase(
        classname=element.get("classname", ""),
        name=element.get("name", ""),
        file=element.get("file"),
        status=status,
        message=message,
        text=text,
    )


def parse_junit(data: bytes) -> JUnitReport:
    """Parse a JUnit XML document (``<testsuites>`` or a bare ``<testsuite>``).

    Suites may nest; every ``<testcase>`` anywhere below the root counts once.

    Raises:
        JUnitError: the bytes are not decodable, not well-formed XML, contain a DTD or
            entity declaration, or the root element is not a test suite.

    """
    try:
        text = _decode(data)
    except (UnicodeError, LookupError) as exc:
        raise JUnitError(f"cannot decode the document ({exc})") from None
    if _FORBIDDEN.search(text):
        raise JUnitError("document type or entity declarations (<!DOCTYPE/<!ENTITY) are refused")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise JUnitError(f"malformed XML ({exc})") from None
    except (ValueError, RecursionError) as exc:  # pragma: no cover - expat edge cases
        raise JUnitError(f"malformed XML ({exc})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError(f"root element is <{root.tag}>, expected <testsuites> or <testsuite>")
    cases = tuple(_case(el) for el in root.iter("testcase"))
    counts = {status: 0 for _, status in _STATUS_TAGS}
    for case in cases:
        if case.status != "passed":
            counts[case.status] += 1
    failures, errors, skipped = counts["failed"], counts["error"], counts["skipped"]
    return JUnitReport(
        tests=len(cases),
        failures=failures,
        errors=errors,
        skipped=skipped,
        passed=len(cases) - failures - errors - skipped,
        cases=cases,
    )
