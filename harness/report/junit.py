"""JUnit XML for CI: the candidate's cases as test cases, judged the way the gate judges.

One ``<testsuite>`` for the candidate (a second one for the re-executed baseline only when
asked: it is context, not the thing under test). A case's testcase is

* ``<failure>`` only when the gate's verdict is FAIL or WARN *because of the case*: a
  ``fail`` or ``warn`` reason names it (its ``case_id``, or its ``cases`` list when it
  names no single case). A case the gate mentions at info level (a regression within
  noise, a flip within the budget) is not a failed test: the mention goes to
  ``<system-out>`` and the ``gate.info`` property, so a PASS gate is never a red test;
* ``<skipped>`` for a case without any trial, a baseline case that was not re-executed,
  and judgment-lane cases (run, never scored);
* passed otherwise.

Every testcase carries ``time`` (agent plus verifier seconds of its trials) and its
trials' outcomes as ``<properties>`` (``trial.<i>`` = outcome and failure type, plus pass
rate, pass^k and label), and every trial that did not pass is listed in ``<system-out>``
with its reason and its evidence file in the report folder. Every suite carries the run's
start as ``timestamp`` and the gate's verdict and reasons as ``<properties>``, so a CI
viewer that only reads JUnit still sees why the run passed or failed. Built with
ElementTree, which escapes every text and attribute.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from harness.gate.decide import Reason
from harness.report.data import ArmCase, CaseView, EvidenceGroup, ReportData

__all__ = ["gate_blame", "render_junit"]

# Characters XML 1.0 cannot carry at all (control characters, lone surrogates, U+FFFE/F).
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    """Replace what XML cannot carry with U+FFFD, so any record text yields valid XML."""
    return _ILLEGAL.sub("\ufffd", text)


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def gate_blame(data: ReportData) -> tuple[dict[str, list[Reason]], dict[str, list[Reason]]]:
    """Split the reasons naming each case: (warn/fail reasons, info reasons).

    The first map is empty unless the verdict is FAIL or WARN: only then does a case fail
    as a test. Blocked runs fail no case (the environment, not a case, stopped them).
    """
    blame: dict[str, list[Reason]] = {}
    info: dict[str, list[Reason]] = {}
    for r in data.reasons:
        serious = r.severity in ("warn", "fail") and data.verdict in ("warn", "fail")
        for cid in r.named_cases():
            (blame if serious else info).setdefault(cid, []).append(r)
    return blame, info


def _fail_message(c: CaseView, ac: ArmCase, arm: str, blame: list[Reason]) -> str:
    s = ac.summary
    named = "; ".join(f"{r.severity.upper()} {r.code}" for r in blame)
    types: dict[str, int] = {}
    for m in ac.marks:
        if m.failure_type is not None and m.outcome.value == "fail":
            types[m.failure_type.value] = types.get(m.failure_type.value, 0) + 1
    parts = [
        f"{s.fails} of {s.n} judged trials failed"
        + (f" ({', '.join(f'{t} x{n}' for t, n in sorted(types.items()))})" if types else "")
    ]
    if s.infra_errors or s.evaluator_errors:
        parts.append(f"{s.infra_errors} infra / {s.evaluator_errors} evaluator errors")
    parts.append(f"pass rate {_rate(s.pass_rate)}, pass^{s.k} {_rate(s.pass_hat_k)}")
    if arm == "candidate":
        if c.broken:
            parts.append("BROKEN: all-pass in the baseline, all-fail in the candidate")
        elif c.regression:
            parts.append("REGRESSION: all-pass in the baseline, not all-pass in the candidate")
        if c.delta_pass_rate is not None:
            parts.append(f"delta pass rate {c.delta_pass_rate:+.2f} vs baseline")
    if c.critical:
        parts.append("critical case")
    if named:
        parts.insert(0, "the gate names this case: " + named)
    return "; ".join(parts)


def _evidence_index(data: ReportData) -> dict[tuple[str, str], list[EvidenceGroup]]:
    index: dict[tuple[str, str], list[EvidenceGroup]] = {}
    for groups in (data.failures, data.infra_errors, data.evaluator_errors):
        for g in groups:
            index.setdefault((g.case_id, g.arm), []).append(g)
    return index


def _details(groups: list[EvidenceGroup]) -> str:
    lines: list[str] = []
    for ev in sorted((ev for g in groups for ev in g.items), key=lambda e: e.trial):
        ft = f" ({ev.failure_type.value})" if ev.failure_type else ""
        lines.append(f"trial {ev.trial}: {ev.outcome.value}{ft}: {ev.reason}")
        if ev.failing_tests:
            lines.append("  failing tests: " + ", ".join(ev.failing_tests[:10]))
        if ev.bound is not None:
            lines.append(f"  bound fired: {ev.bound.kind.value} (limit {ev.bound.limit:g})")
        lines.append(f"  evidence: records/{ev.paths[0].ref}.json")
    return "\n".join(lines)


def _trial_properties(tc: ET.Element, ac: ArmCase) -> ET.Element:
    s = ac.summary
    props = ET.SubElement(tc, "properties")
    for m in ac.marks:
        value = m.outcome.value + (f" ({m.failure_type.value})" if m.failure_type else "")
        if m.attempts > 1:
            value += f", {m.attempts} attempts"
        ET.SubElement(props, "property", name=f"trial.{m.trial}", value=value)
    for name, value in (
        ("pass_rate", _rate(s.pass_rate)),
        (f"pass^{s.k}", _rate(s.pass_hat_k)),
        (f"pass@{s.k}", _rate(s.pass_at_k)),
        ("label", s.label),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    return props


def _suite(root: ET.Element, data: ReportData, arm: str, release: str) -> dict[str, int]:
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"{arm}: {release}",
        timestamp=data.release.created_at.isoformat(timespec="seconds"),
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("verdict", data.verdict),
        ("run_id", data.run_id),
        ("release", release),
        ("system_digest", data.release.system_digest),
        ("policy_digest", data.decision.policy_digest),
        ("k", str(data.release.k)),
        *((f"reason.{i}", f"[{r.severity}] {r.message}") for i, r in enumerate(data.reasons, 1)),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    evidence = _evidence_index(data)
    blame, info = gate_blame(data) if arm == "candidate" else ({}, {})
    for c in data.cases:
        ac = c.candidate if arm == "candidate" else c.baseline
        tc = ET.SubElement(
            suite,
            "testcase",
            classname=f"harness.{arm}",
            name=c.case_id,
            time=f"{ac.seconds if ac is not None else 0.0:.3f}",
        )
        counts["tests"] += 1
        if ac is None or ac.summary.trials == 0:
            ET.SubElement(tc, "skipped", message=f"no trials of this case in the {arm}")
            counts["skipped"] += 1
            continue
        if arm == "baseline" and c.baseline_source == "stored":
            why = (
                "re-executed from recorded model responses (drift check only)"
                if data.decision.baseline_replayed
                else "not re-executed in this run"
            )
            ET.SubElement(
                tc, "skipped", message=f"{why}: the comparison used the stored baseline results"
            )
            counts["skipped"] += 1
            continue
        notes = info.get(c.case_id, [])
        props = _trial_properties(tc, ac)
        if notes:
            ET.SubElement(
                props, "property", name="gate.info", value=", ".join(r.code for r in notes)
            )
        s = ac.summary
        details = _details(evidence.get((c.case_id, arm), []))
        if notes:
            details = "\n".join(
                [*(f"gate (info, not a failure): {r.message}" for r in notes), details]
            ).rstrip("\n")
        # Only the candidate is judged by the gate; a baseline case is context, never failed.
        if c.case_id in blame:
            el = ET.SubElement(
                tc,
                "failure",
                type=blame[c.case_id][0].code,
                message=_fail_message(c, ac, arm, blame[c.case_id]),
            )
            el.text = details
            counts["failures"] += 1
        out = ET.SubElement(tc, "system-out")
        out.text = (
            f"{s.passes}/{s.n} judged trials passed; {s.infra_errors} infra / "
            f"{s.evaluator_errors} evaluator errors; pass rate {_rate(s.pass_rate)}; "
            f"pass^{s.k} {_rate(s.pass_hat_k)}; pass@{s.k} {_rate(s.pass_at_k)}; "
            f"label {s.label}" + (f"\n{details}" if details else "")
        )
    if arm == "candidate":
        for j in data.judgment:
            tc = ET.SubElement(
                suite, "testcase", classname="harness.judgment", name=j.case_id, time="0.000"
            )
            ET.SubElement(
                tc, "skipped", message=(f"judgment lane: {len(j.marks)} trials run, never scored")
            )
            counts["tests"] += 1
            counts["skipped"] += 1
    view = data.arm(arm)  # type: ignore[arg-type]
    seconds = 0.0
    if view is not None and view.cost is not None:
        seconds = view.cost.agent_seconds + view.cost.verifier_seconds
    for key, count in counts.items():
        suite.set(key, str(count))
    suite.set("time", f"{seconds:.3f}")
    return {**counts, "time": round(seconds * 1000)}


def render_junit(data: ReportData, *, baseline: bool = False) -> bytes:
    """Render the JUnit XML document for ``data`` (UTF-8 bytes, XML declaration).

    ``baseline`` adds the re-executed baseline as a second suite (never failed: context).
    """
    root = ET.Element("testsuites", name=f"harness {data.run_id}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0}
    arms = [("candidate", data.release.release)]
    if baseline and data.arm("baseline") is not None:
        arms.append(("baseline", data.release.baseline or "baseline"))
    for arm, release in arms:
        for key, count in _suite(root, data, arm, release).items():
            totals[key] += count
    millis = totals.pop("time")
    for key, count in totals.items():
        root.set(key, str(count))
    root.set("time", f"{millis / 1000:.3f}")
    for el in root.iter():
        if el.text:
            el.text = _clean(el.text)
        for key, value in el.attrib.items():
            el.set(key, _clean(value))
    ET.indent(root)
    body: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return body + b"\n"
