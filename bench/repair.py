"""Benchmark of DOI repair (issue 13): precision and recall, verified vs not, vs a regex cleaner.

Cases: the real damaged cells in ``tests/data/repair/real_cases.jsonl`` and damage applied to
real Crossref DOIs the way Cioffi et al. 2022 (Scientometrics 127:3593) and Xu et al. 2019
(Scientometrics) describe it: trailing punctuation, en/em dashes, glued URLs and text, HTML
entities broken into ``lt;``, lost ``<>``, a lost ``10.``, doubled prefixes and ``doi:doi:``,
O/0 and l/1 OCR swaps, spaces and line-break hyphens inside, unbalanced brackets, and #22's
families (text glued on without a space, markup inside, a space splitting a number, hyphen runs,
junk before ``10.``). Plus cells holding another identifier (a handle, a journal path, an ISSN
path: no unverified suggestion may be shown for them) and controls: intact DOIs, DOIs that
exist *with* what looks like damage (``10.x/abc.``), and damaged DOIs whose original does not
exist. The proxy simulator (real HTTP on loopback) knows which DOIs exist.

Methods compared, each scored against the intended DOI:

* ``verified``: :func:`airflow_doi.repair.verify.repair` (suggestions checked on the proxy);
* ``suggestion only``: the same with ``verify=False`` (the cheapest candidate, unchecked);
* ``regex cleaner``: a baseline reimplementing the published cleaners' main rules from their
  descriptions (cut everything before ``10.``, strip a list of suffix junk, collapse ``__``/
  ``..``, drop spaces and markup), unchecked and checked on the proxy.

precision = correct repairs / repairs made; recall = correct repairs / damaged values whose
intended DOI exists; "top right" = suggestions equal to the intended DOI / damaged values given
one; "not-a-DOI shown" = suggestions for cells holding another identifier; requests per row =
proxy requests / input rows; "own exists repaired" counts values whose own DOI exists and were
changed anyway (must be 0). A last run adds decoys (a random wrong candidate of one damaged
value in five also exists, as near-misses do in a real registry) to show what the ranking
costs. Also times ``suggest_repairs`` (values/s) and a 1 MB cell.

    python bench/repair.py [--per-damage 40] [--seed 13]   # also a run with decoys
    python bench/repair.py --write-cases    # regenerate tests/data/repair/synthetic_cases.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path

from airflow_doi.repair import suggest_repairs
from airflow_doi.repair.verify import repair
from airflow_doi.resolver.simulator import ProxySimulator, make_records
from airflow_doi.syntax import ascii_upper, validate

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CROSSREF = DATA / "realworld" / "crossref_dois.txt"
REAL_CASES = DATA / "repair" / "real_cases.jsonl"
SYNTHETIC_CASES = DATA / "repair" / "synthetic_cases.jsonl"

Damage = Callable[[str, random.Random], "str | None"]


# -- damage, as the papers describe it ------------------------------------------------------

def _trailing(doi: str, rng: random.Random) -> str:
    return doi + rng.choice([".", ",", ";", ".]", "]", ")", '"', ".'", ":", "/"])


def _dash(doi: str, rng: random.Random) -> str | None:
    if "-" not in doi:
        return None
    return doi.replace("-", rng.choice(["\u2013", "\u2014", "\u2212", "\u2010"]))


def _glued_url(doi: str, rng: random.Random) -> str:
    url = rng.choice(["http://dx.doi.org/", "https://doi.org/", "http://www.example.org/article/"])
    return doi + rng.choice([".", "", " "]) + url + doi


def _appended_text(doi: str, rng: random.Random) -> str:
    return doi + rng.choice([
        " The Digital Object Identifier (DOI) System enables identification of digital entities",
        " [doi]", ". Epub 2017 Jan 5.", " PMID: 28123456", " (accessed 12 May 2019)",
        ", 2018", " Available at:",
    ])


def _html_entity(doi: str, rng: random.Random) -> str | None:
    if "<" not in doi:
        return None
    broken = rng.choice([("lt;", "gt;"), ("&lt;", "&gt;"), ("lt;", ">")])
    return doi.replace("<", broken[0]).replace(">", broken[1])


def _lost_angles(doi: str, rng: random.Random) -> str | None:
    if "<" not in doi and "[" not in doi:
        return None
    return re.sub(r"[<>\[\]]", "", doi)


def _lost_directory(doi: str, rng: random.Random) -> str:
    return rng.choice([doi[3:], doi[2:], doi[1:], "10" + doi[3:]])


def _doubled(doi: str, rng: random.Random) -> str:
    prefix = doi.partition("/")[0]
    return rng.choice([
        f"{prefix}/{doi}", f"doi:doi:{doi}", f"https://doi.org/https://doi.org/{doi}",
        f"doi: https://doi.org/{doi}", f"DOI: DOI {doi}",
    ])


def _ocr(doi: str, rng: random.Random) -> str | None:
    head, _, tail = doi.partition("/")
    if rng.random() < 0.5 and ("0" in head[3:] or "1" in head[3:]):
        spots = [i for i, c in enumerate(head) if i >= 3 and c in "01"]
        i = rng.choice(spots)
        return head[:i] + {"0": "O", "1": "l"}[head[i]] + head[i + 1:] + "/" + tail
    spots = [m.start() for m in re.finditer(r"(?<=[0-9])[01](?=[0-9])", tail)]
    if not spots:
        return None
    i = rng.choice(spots)
    swapped = {"0": "O", "1": "l"}[tail[i]]
    return f"{head}/{tail[:i]}{swapped}{tail[i + 1:]}"


def _space(doi: str, rng: random.Random) -> str | None:
    dots = [m.end() for m in re.finditer(r"[./]", doi) if m.end() > 8]
    if not dots:
        return None
    i = rng.choice(dots)
    return doi[:i] + rng.choice([" ", "\n", "\u00a0"]) + doi[i:]


def _hyphen_break(doi: str, rng: random.Random) -> str | None:
    slash = doi.find("/")
    spots = [i for i in range(slash + 3, len(doi) - 2) if doi[i - 1].isalnum() and doi[i].isalnum()]
    if not spots:
        return None
    i = rng.choice(spots)
    return doi[:i] + "-\n" + doi[i:]


def _unbalanced(doi: str, rng: random.Random) -> str:
    return rng.choice([doi + "]", doi + ")", "(" + doi, "[" + doi + "]."])


def _leading(doi: str, rng: random.Random) -> str:
    return rng.choice([
        f"DOI {doi}", f"https://onlinelibrary.wiley.com/doi/full/{doi}", f"[{doi}]",
        f"https://www.tandfonline.com/doi/abs/{doi}?journalCode=abc", f"<{doi}>",
    ])


def _encoded(doi: str, rng: random.Random) -> str:
    return doi.replace("/", "%2F")


def _dot_for_slash(doi: str, rng: random.Random) -> str | None:
    head, _, tail = doi.partition("/")
    if not tail[:1].isalpha():
        return None
    return f"{head}.{tail}"


def _invisible(doi: str, rng: random.Random) -> str:
    slash = doi.find("/")
    i = rng.randrange(slash + 1, len(doi))
    return doi[:i] + rng.choice(["\u00ad", "\u200b", "\ufeff"]) + doi[i:]


def _placeholder(doi: str, rng: random.Random) -> str:
    return re.sub(r"(?<=[./])", "?", doi)


def _combined(doi: str, rng: random.Random) -> str | None:
    first = rng.choice([_doubled, _leading, _lost_directory])
    damaged = first(doi, rng)
    return None if damaged is None else _trailing(damaged, rng)


# -- issue 22's families: text glued on, markup inside, split numbers, hyphen runs, junk ------

def _glued_tail(doi: str, rng: random.Random) -> str:
    year = rng.randrange(1990, 2024)
    return doi + rng.choice([
        f".pmid:{rng.randrange(10**7, 10**8)}", f"pmid:{rng.randrange(10**7, 10**8)}",
        f">accessed {rng.randrange(1, 29)}", "xyz.sagepub.com", "journals.sagepub.com/home/abc",
        "/-/DCSupplemental", "(epub ahead of print)", " [Epub ahead of print]",
        "articlepublishedonlinebeforeprint", f"({year})", f"({year}", "[doi]pii",
        f".......{rng.randrange(1, 300)},{rng.randrange(1, 9999)}({year})", "#", "#_blank",
        "#doilink", f"#sa{rng.randrange(1, 9)}", "|",
    ])


def _markup_inside(doi: str, rng: random.Random) -> str | None:
    slash = doi.find("/")
    i = rng.randrange(slash + 1, len(doi))
    if "_" in doi and rng.random() < 0.3:
        return doi.replace("_", "\\_")
    tag = rng.choice(["<br/>", "<br>", "<br />", "<xml_add>e</xml_add>", "<i></i>"])
    return doi[:i] + tag + doi[i:]


def _split_number(doi: str, rng: random.Random) -> str | None:
    slash = doi.find("/")
    spots = [i for i in range(slash + 2, len(doi))
             if doi[i - 1].isdigit() and doi[i].isalnum() and any(c.isdigit() for c in doi[i:])
             and not re.fullmatch(r"(?:19|20)[0-9]{2}", doi[i:])]
    if not spots:
        return None
    i = rng.choice(spots)
    return doi[:i] + " " + doi[i:]


def _hyphen_run(doi: str, rng: random.Random) -> str | None:
    spots = [i for i, c in enumerate(doi) if c == "-" and i > doi.find("/")]
    if not spots:
        return None
    i = rng.choice(spots)
    run = rng.choice(["-\u00ad\u2010", "-\u2010", "\u2010-", "\u00ad-", "-\u00ad\u2011"])
    return doi[:i] + run + doi[i + 1:]


def _junk_before(doi: str, rng: random.Random) -> str:
    return rng.choice(["e", "d", "1", "doi"]) + doi if rng.random() < 0.75 else "2" + doi[1:]


DAMAGES: dict[str, Damage] = {
    "trailing_punctuation": _trailing,
    "unicode_dash": _dash,
    "glued_url": _glued_url,
    "appended_text": _appended_text,
    "html_entity": _html_entity,
    "lost_angle_brackets": _lost_angles,
    "lost_directory": _lost_directory,
    "doubled": _doubled,
    "ocr": _ocr,
    "space_inside": _space,
    "line_break_hyphen": _hyphen_break,
    "unbalanced_bracket": _unbalanced,
    "leading_text": _leading,
    "percent_encoded": _encoded,
    "dot_for_slash": _dot_for_slash,
    "invisible_character": _invisible,
    "placeholder": _placeholder,
    "combined": _combined,
    "glued_tail": _glued_tail,
    "markup_inside": _markup_inside,
    "split_number": _split_number,
    "hyphen_run": _hyphen_run,
    "junk_before_10": _junk_before,
}


def not_dois(rng: random.Random, count: int) -> list[str]:
    """Cells that hold another identifier, never a DOI: no suggestion may be shown for them
    unless the proxy confirms it (a handle's, a year's or an ISSN's digits are no prefix)."""
    out = []
    for _ in range(count):
        out.append(rng.choice([
            f"hdl.handle.net/{rng.randrange(10000, 99999)}/{rng.randrange(10**6, 10**7)}",
            f"https://hdl.handle.net/{rng.randrange(1000, 9999)}/{rng.randrange(10**4, 10**6)}",
            f"JOUR/{rng.randrange(1990, 2024)}/{rng.randrange(10**5, 10**6):06d}-T",
            f"example.com/{rng.randrange(1000, 9999)}-{rng.randrange(1000, 9999)}/"
            f"art{rng.randrange(100)}",
        ]))
    return out


def sici_dois(rng: random.Random, count: int) -> list[str]:
    """SICI-shaped DOIs, made up (Crossref's sample holds none); the simulator knows them."""
    out = []
    for _ in range(count):
        issn = f"{rng.randrange(1000, 9999)}-{rng.randrange(1000, 9999)}"
        year = rng.randrange(1985, 2005)
        code = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(6))
        vol, page = f"{rng.randrange(1, 999):03d}", f"{rng.randrange(1, 9999):04d}"
        left, right = rng.choice(["<>", "[]"])
        out.append(f"10.1890/{issn}({year}){vol}{left}{page}:{code}{right}2.0.CO;2")
    return out


def build_cases(per_damage: int, seed: int) -> tuple[list[dict], list[str]]:
    """The synthetic cases and the DOIs that exist (the simulator's records)."""
    rng = random.Random(seed)
    crossref = [line for line in CROSSREF.read_text(encoding="utf-8").split("\n") if line]
    sici = sici_dois(rng, 60)
    exists = crossref + sici
    cases: list[dict] = []
    pool = crossref[: len(crossref) * 4 // 5]  # the last fifth stays intact (controls)
    for name, damage in DAMAGES.items():
        source = sici if name in ("html_entity", "lost_angle_brackets") else pool
        made = 0
        for _ in range(per_damage * 20):
            if made == per_damage:
                break
            doi = rng.choice(source)
            damaged = damage(doi, rng)
            if damaged is None or damaged == doi:
                continue
            cases.append({"damaged": damaged, "doi": doi, "damage": name, "exists": True})
            made += 1
    # Damage to DOIs that do not exist: a verified "repair" would be a false one.
    for i in range(per_damage * 2):
        ghost = f"10.{rng.randrange(1000, 9999)}/ghost.{i}.{rng.randrange(10**6)}"
        damage = rng.choice([_trailing, _appended_text, _lost_directory, _doubled, _space])
        cases.append({"damaged": damage(ghost, rng), "doi": ghost, "damage": "ghost",
                      "exists": False})
    # Controls: intact DOIs, and DOIs that exist with damage-like endings: leave them alone.
    for doi in crossref[len(crossref) * 4 // 5:][: per_damage * 3]:
        cases.append({"damaged": doi, "doi": None, "damage": "control", "exists": True})
    for cell in not_dois(rng, per_damage):
        cases.append({"damaged": cell, "doi": None, "damage": "not_a_doi", "exists": False})
    for doi in rng.sample(crossref, per_damage):
        odd = doi + rng.choice([".", ")", " A"]).replace(")", "(1)")
        exists.append(odd)
        cases.append({"damaged": odd, "doi": None, "damage": "control_odd", "exists": True})
    return cases, exists


# -- the baseline: the published regex cleaners' main rules -------------------------------

_PREFIX_JUNK = re.compile(r"^.*?(?=10\.)", re.DOTALL)
_SUFFIX_JUNK = re.compile(
    r"(?:[.,;:\]\)\"'/]|\[doi\]|/abstract|/full|/pdf|\.pdf|\.html?|#.*|\?.*|\s.*)$",
    re.IGNORECASE | re.DOTALL,
)
_TAGS = re.compile(r"</?[a-z]+[^<>]*>", re.IGNORECASE)


def regex_cleaner(value: str) -> str | None:
    """One cleaned DOI or None: prefix junk, suffix junk, other-type errors (our reading)."""
    text = _PREFIX_JUNK.sub("", value.strip(), count=1)
    text = _TAGS.sub("", text).replace("__", "_").replace("..", ".")
    while True:
        cleaned = _SUFFIX_JUNK.sub("", text)
        if cleaned == text:
            break
        text = cleaned
    check = validate(text)
    if not check.valid or check.doi is None:
        return None
    return check.doi


# -- scoring ---------------------------------------------------------------------------------

def score(label: str, cases: list[dict], picks: list[str | None]) -> dict:
    made = correct = own_changed = 0
    wanted = sum(1 for c in cases if c["doi"] is not None and c["exists"])
    for case, pick in zip(cases, picks, strict=True):
        own = validate(case["damaged"])
        if pick is None or (own.valid and own.key == ascii_upper(pick)):
            continue  # no repair (a cleaner returning the value unchanged made none)
        made += 1
        if case["doi"] is None:
            own_changed += 1
        elif case["exists"] and ascii_upper(pick) == ascii_upper(case["doi"]):
            correct += 1
    offered = right = silly = 0
    for case, pick in zip(cases, picks, strict=True):
        if pick is None:
            continue
        if case["damage"] == "not_a_doi":
            silly += 1
        elif case["doi"] is not None:
            offered += 1
            right += ascii_upper(pick) == ascii_upper(case["doi"])
    return {
        "method": label,
        "top_right_where_offered": right / offered if offered else 0.0,
        "not_a_doi_suggested": silly,
        "repairs": made,
        "correct": correct,
        "precision": correct / made if made else 0.0,
        "recall": correct / wanted if wanted else 0.0,
        "own_exists_repaired": own_changed,
    }


def evaluate(cases: list[dict], exists: list[str]) -> list[dict]:
    values = [c["damaged"] for c in cases]
    fast = {"rate": 2000.0, "concurrency": 16, "burst": 50, "backoff_base": 0.01}
    with ProxySimulator(make_records(exists)) as sim:
        verified = repair(values, base_url=sim.url, **fast)  # type: ignore[arg-type]
        requests = sim.stats()["requests"]
        baseline = [regex_cleaner(v) for v in values]
        checked = [b for b in baseline if b is not None]
        from airflow_doi.resolver import resolve

        found = {r.key for r in resolve(checked, base_url=sim.url, **fast)  # type: ignore[arg-type]
                 if r.status in ("resolved", "no_values")}
    unverified = repair(values, verify=False)
    rows = [
        score("verified", cases, [r.suggestion if r.verified else None for r in verified]),
        score("suggestion only", cases, [r.suggestion for r in unverified]),
        score("regex cleaner", cases, baseline),
        score("regex cleaner, verified", cases,
              [b if b is not None and ascii_upper(b) in found else None for b in baseline]),
    ]
    rows[0]["requests"] = requests
    rows[0]["requests_per_row"] = requests / len(values)
    return rows


def per_damage(cases: list[dict], exists: list[str]) -> dict[str, tuple[int, int]]:
    """Verified recall per kind of damage: (recovered, cases)."""
    values = [c["damaged"] for c in cases]
    with ProxySimulator(make_records(exists)) as sim:
        results = repair(values, base_url=sim.url, rate=2000.0, concurrency=16, burst=50)
    table: dict[str, list[int]] = {}
    for case, result in zip(cases, results, strict=True):
        if case["doi"] is None or not case["exists"]:
            continue
        hit = bool(result.verified) and ascii_upper(result.suggestion or "") == ascii_upper(
            case["doi"]
        )
        counts = table.setdefault(case["damage"], [0, 0])
        counts[0] += hit
        counts[1] += 1
    return {name: (a, b) for name, (a, b) in sorted(table.items())}


def speed(values: list[str]) -> float:
    started = time.perf_counter()
    for value in values:
        suggest_repairs(value)
    return len(values) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-damage", type=int, default=40)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--write-cases", action="store_true")
    args = parser.parse_args()
    cases, exists = build_cases(args.per_damage, args.seed)
    if args.write_cases:
        # Each case names the records it needs, so a test can build a small simulator.
        known = {ascii_upper(d) for d in exists}
        with SYNTHETIC_CASES.open("w", encoding="utf-8") as out:
            for case in cases:
                needs = [d for d in (case["doi"], case["damaged"]) if d and case["exists"]]
                if case["damage"] == "control_odd":
                    needs.append(case["damaged"][:-1] if case["damaged"].endswith(".") else "")
                records = [d for d in needs if d and ascii_upper(d) in known]
                out.write(json.dumps({**case, "records": records}, ensure_ascii=False) + "\n")
        print(f"wrote {len(cases)} cases to {SYNTHETIC_CASES}")
        return
    cases += [
        {**json.loads(line), "exists": True, "damage": "real"}
        for line in REAL_CASES.read_text(encoding="utf-8").splitlines()
    ]
    exists += [c["doi"] for c in cases if c["damage"] == "real"]
    damaged = sum(1 for c in cases if c["doi"] is not None and c["exists"])
    print(f"{len(cases)} cases: {damaged} damaged with an existing original, "
          f"{sum(1 for c in cases if not c['exists'])} damaged ghosts, "
          f"{sum(1 for c in cases if c['doi'] is None)} controls; {len(exists)} records")
    print(f"{'method':<26}{'repairs':>8}{'correct':>9}{'precision':>11}{'recall':>8}"
          f"{'own exists repaired':>21}{'top right':>11}{'not-a-DOI shown':>17}")
    for row in evaluate(cases, exists):
        print(f"{row['method']:<26}{row['repairs']:>8}{row['correct']:>9}"
              f"{row['precision']:>11.3f}{row['recall']:>8.3f}{row['own_exists_repaired']:>21}"
              f"{row['top_right_where_offered']:>11.3f}{row['not_a_doi_suggested']:>17}"
              + (f"   ({row['requests']} proxy requests, {row['requests_per_row']:.2f} per row)"
                 if "requests" in row else ""))
    # Real registries hold near-misses: let a random wrong candidate of one damaged value in
    # five exist too, and see what the ranking makes of it.
    rng = random.Random(args.seed)
    decoys = []
    for case in cases:
        if case["doi"] is None or rng.random() >= 0.2:
            continue
        wrong = [c.doi for c in suggest_repairs(case["damaged"])
                 if ascii_upper(c.doi) != ascii_upper(case["doi"])]
        if wrong:
            decoys.append(rng.choice(wrong))
    row = evaluate(cases, exists + decoys)[0]
    print(f"{'verified, ' + str(len(decoys)) + ' decoys':<26}{row['repairs']:>8}"
          f"{row['correct']:>9}{row['precision']:>11.3f}{row['recall']:>8.3f}"
          f"{row['own_exists_repaired']:>21}")
    print("verified recall per damage:")
    for name, (hit, total) in per_damage(cases, exists).items():
        print(f"  {name:<26}{hit:>4}/{total:<4}")
    damaged_values = [c["damaged"] for c in cases if c["doi"] is not None]
    clean_values = [c["damaged"] for c in cases if c["damage"] == "control"]
    print(f"suggest_repairs: {speed(damaged_values * 3):,.0f} damaged values/s, "
          f"{speed(clean_values * 10):,.0f} intact values/s")
    huge = "10.1000/abc. " + "word " * 200_000
    started = time.perf_counter()
    found = suggest_repairs(huge)
    print(f"1 MB cell: {len(found)} candidates in {(time.perf_counter() - started) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
