"""DOI repair (issue 13): the rule table, the bounded search, verification on the simulator.

Rule tests need no network; everything that verifies goes to the proxy simulator over real
loopback HTTP. Development cases live in tests/data/repair/ (see its README for sources).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from airflow_doi.cli import repair as command
from airflow_doi.cli.repair import added_columns
from airflow_doi.repair import (
    MAX_CANDIDATES,
    MAX_CUTS,
    REPAIR_COLUMNS,
    RULES,
    suggest_repairs,
)
from airflow_doi.repair.verify import RepairStats, repair, repair_columns
from airflow_doi.resolver import ResolverConfig
from airflow_doi.resolver.simulator import ProxySimulator, make_records
from airflow_doi.syntax import ascii_upper, validate
from tests import forked

DATA = Path(__file__).parent / "data" / "repair"
RULE_VECTORS = [json.loads(line) for line in (DATA / "rule_vectors.jsonl").open(encoding="utf-8")]
REAL_CASES = [json.loads(line) for line in (DATA / "real_cases.jsonl").open(encoding="utf-8")]
SYNTHETIC = [json.loads(line) for line in (DATA / "synthetic_cases.jsonl").open(encoding="utf-8")]
CROSSREF = (Path(__file__).parent / "data" / "realworld" / "crossref_dois.txt").read_text(
    encoding="utf-8"
).split()
FAST = ResolverConfig(
    rate=500, burst=20, concurrency=8, backoff_base=0.01, backoff_max=0.05, timeout=5,
    breaker_cooldown=0.05, breaker_give_up=1.0,
)


# -- the rules -----------------------------------------------------------------------------

@pytest.mark.parametrize("vector", RULE_VECTORS, ids=lambda v: f"{v['rule']}:{v['damaged']!r}")
def test_rule_vector(vector):
    candidates = suggest_repairs(vector["damaged"])
    dois = [c.doi for c in candidates]
    assert vector["expect"] in dois, (vector, dois)
    found = candidates[dois.index(vector["expect"])]
    assert dois.index(vector["expect"]) == vector.get("rank", 0), dois
    assert vector["rule"] in found.rules


def test_every_rule_has_a_vector_and_a_unique_name():
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))
    assert set(names) <= {v["rule"] for v in RULE_VECTORS}


def test_issue_examples_come_first():
    assert suggest_repairs("10.3748/wjg.v10.i5.707.")[0].doi == "10.3748/wjg.v10.i5.707"
    assert suggest_repairs("1038/nature14129")[0].rule == "lost_directory"
    chain = suggest_repairs("doi:doi:10.1000/abc.")[0]
    assert chain.doi == "10.1000/abc"
    assert set(chain.rules) == {"double_wrapped", "trailing_punctuation"}
    assert chain.rule == "+".join(chain.rules)


def test_a_still_damaged_candidate_ranks_after_its_repair():
    # "10.1000/abc." is valid and cheaper to reach, but still ends in a period.
    dois = [c.doi for c in suggest_repairs("10.1000/abc. The Digital Object Identifier")]
    assert dois.index("10.1000/abc") < dois.index("10.1000/abc.")


def test_the_values_own_doi_is_never_a_candidate():
    for value in ("10.1000/abc.", "10.1037//0022-3514.51.3.541", "10.1000/abc (PMID: 1)"):
        own = validate(value).key
        assert own is not None
        assert all(ascii_upper(c.doi) != own for c in suggest_repairs(value))


def test_intact_dois_mostly_get_nothing_and_never_a_cheap_guess():
    # Real Crossref DOIs: the few that get candidates look damaged (``//``, ``-o05``, a tail
    # word after a number: verify_only cuts); the
    # value's own existence check in repair() keeps them unchanged.
    flagged = {d: suggest_repairs(d) for d in CROSSREF}
    flagged = {d: c for d, c in flagged.items() if c}
    assert len(flagged) <= len(CROSSREF) // 200
    for candidates in flagged.values():  # nothing shown unless verified, but a "//"
        assert all(c.verify_only or c.rules == ("doubled_punctuation",) for c in candidates)


def test_not_dois_and_missing_values_get_nothing():
    for value in (None, "", "   ", "NYP", "unknown", float("nan"), 12, b"\xff\xfe"):
        assert suggest_repairs(value) == []


def test_ocr_candidates_are_flagged_verify_only():
    candidates = suggest_repairs("10.1O16/j.aca.2006.O7.086")
    assert candidates and all(c.verify_only for c in candidates)
    assert candidates[0].doi == "10.1016/j.aca.2006.07.086"


def test_bounded_candidates_and_time():
    assert len(suggest_repairs("doi:doi:10.1000/a.b c-d (e) [f] lt;g– h.", limit=3)) <= 3
    with pytest.raises(ValueError, match="limit"):
        suggest_repairs("10.1000/a.", limit=0)
    noisy = "doi: DOI: 10.1O00/ab – cd lt;x> ]) [doi]. http://x.org/ 10.2000/y;z . , ; "
    assert len(suggest_repairs(noisy)) <= MAX_CANDIDATES
    started = time.perf_counter()
    words = suggest_repairs("10.1000/abc. " + "word " * 200_000)  # a 1 MB cell
    glued = suggest_repairs("10.1000/" + "x" * 1_000_000)  # no whitespace: nothing to cut
    assert time.perf_counter() - started < 1.0
    assert [c.doi for c in words][:1] == ["10.1000/abc"]
    assert glued == []


@pytest.mark.parametrize("cell", [
    "10.1000/1" + " " * 2000 + "(x)",
    "10.1000/1" + "\n" * 2000 + "(x)",
    "doi:doi:10.1000/a\u2013b&amp;c" + " " * 2000 + "x(.",
    "10.1000/a" + " \t" * 1000 + ".x",
    "10.1000/a" + " ," * 1000 + "10.1000/b",
    "10.1000/1" + " pmid" * 400 + "(",
    "10.1000/" + "(" * 2000,
    "10.1000/" + "#|" * 1000,
])
def test_a_cell_full_of_spaces_or_marks_costs_linear_time(cell):
    # Every rule runs on up to 64 intermediate strings of up to 2,048 characters: a pattern
    # that rescans a run of spaces from each of its positions made these take seconds.
    started = time.perf_counter()
    suggest_repairs(cell)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("cell", ["doi: 1038/nature14129", "DOI 1038/nature14129",
                                  "https://doi.org/1038/nature14129", "[1038/nature14129]"])
def test_a_doi_label_before_a_lost_directory_lends_its_digits_nothing(cell):
    [first, *_] = suggest_repairs(cell)
    assert (first.doi, first.verify_only) == ("10.1038/nature14129", False)


@pytest.mark.parametrize("cell", [
    "10.1371/journal.pone.0123456 e0123456", "10.1093/nar/gkz123 47(5)",
    "10.1038/nature12373 500:123", "10.1000/182 p.12", "10.1016/S0140-6736(19)30000-0 2019;393",
])
def test_a_citation_note_after_a_space_is_cut_not_closed_up(cell):
    assert suggest_repairs(cell)[0].doi == cell.split(" ")[0]


#: Cells a user tried (issue 34): each gave a wrong cut first, or nothing at all.
TRIED = {
    "10.1371/journal. pone.0123456": "10.1371/journal.pone.0123456",  # was 10.1371/journal
    "10.1038/nature12373Accessed 2019": "10.1038/nature12373",  # was ...12373Accessed
    "doi:10.1000/xyz</a>": "10.1000/xyz",  # was no suggestion at all
}


@pytest.mark.parametrize("cell", TRIED)
def test_repairs_a_user_tried_give_the_intended_doi_first_offline(cell):
    [first, *_] = suggest_repairs(cell)
    assert (first.doi, first.verify_only) == (TRIED[cell], False)


def test_repairs_a_user_tried_are_verified_first():
    with _simulator(list(TRIED.values())) as sim:
        results = repair(list(TRIED), config=FAST, base_url=sim.url)
    assert [(r.suggestion, r.verified) for r in results] == [
        (doi, True) for doi in TRIED.values()]


@pytest.mark.parametrize("cell", ["10.1000/abc. Retracted", "10.1000/abc. 2019 Jan"])
def test_a_word_after_a_dot_and_a_space_is_not_closed_up(cell):
    assert suggest_repairs(cell)[0].doi == "10.1000/abc"


def _changes(rule, doi):
    """Whether ``rule`` turns the valid ``doi`` into another valid DOI in one step."""
    key = validate(doi).key
    return any(
        (check := validate(produced.strip())).valid and check.key != key
        for produced in rule.transform(doi)
    )


def _valid_samples():
    """Valid DOIs that look damaged, and intact ones: every damaged cell of the cases that is
    valid, their intended DOIs, Crossref's, and damage glued onto Crossref's."""
    cells = [v["damaged"] for v in RULE_VECTORS] + [v["expect"] for v in RULE_VECTORS]
    cells += [c["damaged"] for c in SYNTHETIC] + [c["damaged"] for c in REAL_CASES]
    cells += CROSSREF[:3000]
    tails = [" (retracted)", "Accessed 2019", ". ", "</a>", "\u00a0x", "..", "//", "__",
             "\u2013x", "&amp;", "%2F", "#top", "/full", ".pdf", " [doi]", "(2019)", "?x=1"]
    cells += [doi + tail for doi in CROSSREF[:40] for tail in tails]
    found = {}
    for cell in cells:
        check = validate(cell)
        if check.valid and check.doi is not None:
            found[check.doi] = None
    return list(found)


def test_each_rules_hint_picks_every_valid_doi_it_changes():
    """Rule.hint is what normalize and the report run on a whole column before the rules:
    a rule may change only what its hint matches, in RE2 (Arrow) and in Python alike."""
    from airflow_doi.repair.damage import DAMAGE_HINT
    from airflow_doi.repair.rules import HINTS, OFFERED_ON_VALID

    samples = _valid_samples()
    assert len(samples) > 3000
    column = pa.array(samples, pa.large_string())
    combined = pc.match_substring_regex(column, DAMAGE_HINT).to_pylist()
    changed = 0
    for rule in RULES:
        if rule.verify_only:
            continue
        if rule.hint is None:  # such a rule never changes a valid DOI
            assert not [d for d in samples if _changes(rule, d)], rule.name
            continue
        arrow = pc.match_substring_regex(column, rule.hint).to_pylist()
        for doi, hit, any_hit in zip(samples, arrow, combined, strict=True):
            assert hit == (HINTS[rule.name].search(doi) is not None), (rule.name, doi)
            if _changes(rule, doi):
                changed += 1
                assert hit and any_hit, (rule.name, doi)
    assert changed > 500
    assert [rule.name for rule in OFFERED_ON_VALID] == sorted(
        (r.name for r in RULES if r.hint and not r.verify_only),
        key=lambda name: ([r.name for r in RULES].index(name)
                          + 1000 * next(r.cost for r in RULES if r.name == name)))


def test_the_idfs_own_doi_with_a_hash_is_not_likely_damaged():
    """A new user's trial: the README's headline example (``...456%23789``, the IDF's DOI
    holding a #) was counted as likely damaged (glued_tail). A fragment of digits alone is
    the DOI's; a fragment with a letter, or an empty one, is still a tail."""
    from airflow_doi.repair import likely_damage

    assert likely_damage("10.1000/456#789") is None
    for glued, doi in [("10.1109/tpwrd.2005.848441#sa2", "10.1109/tpwrd.2005.848441"),
                       ("10.4321/jx.0456#", "10.4321/jx.0456"),
                       ("10.1038/embor.2012.30#_blank", "10.1038/embor.2012.30")]:
        found = likely_damage(glued)
        assert found is not None and found.doi == doi and found.rules == ("glued_tail",)


def test_likely_damage_over_a_column_counts_rows_and_keeps_examples():
    from airflow_doi.repair import likely_damage
    from airflow_doi.repair.damage import LikelyDamaged

    cells = ["10.1000/182 (retracted)", "10.1038/nature12373Accessed 2019", None,
             "10.1000/182 (retracted)", "10.1000/182", "10.1371/journal. pone.0123456"]
    found = LikelyDamaged()
    found.add(pa.chunked_array([cells[:3], cells[3:]], pa.large_string()),
              pa.array([True, True, False, True, True, True]))
    found.add(pa.array(["10.1000/abc."]), pa.array([False]))  # not valid: never looked at
    assert found.rows == 4
    assert [(doi, r.doi, r.rule, n) for doi, r, n in found.examples(2)] == [
        ("10.1000/182 (retracted)", "10.1000/182", "appended_text", 2),
        ("10.1038/nature12373Accessed 2019", "10.1038/nature12373", "glued_tail", 1),
    ]
    assert likely_damage("10.1000/182") is None and likely_damage("not a doi") is None
    assert likely_damage("doi:10.1000/abc.").doi == "10.1000/abc"


def test_import_stays_standard_library():
    code = (
        "import sys, airflow_doi.repair.rules as r; r.suggest_repairs('1038/x.');"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('aiohttp', 'pyarrow', 'pandas', 'numpy', 'tenacity', 'airflow')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- verification on the simulator -----------------------------------------------------------

def _simulator(dois):
    return ProxySimulator(make_records(dois))


def test_real_cases_are_recovered_and_verified():
    misses: set[str] = set()  # none left: "1031016/" is read as "10.1016/" once verified
    with _simulator({c["doi"] for c in REAL_CASES}) as sim:
        results = repair([c["damaged"] for c in REAL_CASES], config=FAST, base_url=sim.url)
    for case, result in zip(REAL_CASES, results, strict=True):
        if case["damaged"] in misses:
            assert result.verified is not True
            continue
        assert result.verified is True, (case, result)
        assert result.suggestion == case["doi"]


def test_synthetic_cases_precision_recall_and_own_dois_left_alone():
    records = {d for case in SYNTHETIC for d in case["records"]}
    values = [case["damaged"] for case in SYNTHETIC]
    stats = RepairStats()
    with _simulator(records) as sim:
        results = repair(values, config=FAST, base_url=sim.url, stats=stats)
        by_key = sim.stats()["by_key"]
    made = correct = own_repaired = 0
    wanted = sum(1 for c in SYNTHETIC if c["doi"] and c["exists"])
    for case, result in zip(SYNTHETIC, results, strict=True):
        if not result.verified:
            continue
        made += 1
        if case["doi"] is None:
            own_repaired += 1
        elif case["exists"] and ascii_upper(result.suggestion) == ascii_upper(case["doi"]):
            correct += 1
    assert own_repaired == 0
    # #22's bar on its held-out sets: precision 0.97, recall the published cleaner's 0.961,
    # at most 2.5 requests per input row.
    assert made and correct / made >= 0.97
    assert correct / wanted >= 0.97
    assert stats.resolver.requests <= 2.5 * len(values)
    # One request per distinct key over the whole run (own DOIs and candidates).
    assert by_key and max(by_key.values()) == 1
    assert stats.resolver.requests == sum(by_key.values())
    assert stats.verified == made


def test_offline_top_suggestions_are_right_where_offered_and_never_for_other_identifiers():
    offline = repair([case["damaged"] for case in SYNTHETIC], verify=False)
    offered = right = 0
    for case, result in zip(SYNTHETIC, offline, strict=True):
        if case["damage"] == "not_a_doi":
            assert result.suggestion is None, case  # a handle's, year's or ISSN's digits
        elif case["doi"] is not None and result.suggestion is not None:
            offered += 1
            right += ascii_upper(result.suggestion) == ascii_upper(case["doi"])
        assert result.verified is None  # nothing offline is shown as verified
    assert sum(c["damage"] == "not_a_doi" for c in SYNTHETIC) >= 20
    assert right / offered >= 0.9


@pytest.mark.parametrize("cell", ["hdl.handle.net/11111/2222222", "JOUR/2023/012345-T",
                                  "example.com/1234-5678/abc"])
def test_a_prefix_made_of_another_identifiers_digits_is_shown_only_verified(cell):
    [offline] = repair([cell], verify=False)
    assert (offline.suggestion, offline.verified) == (None, None)
    assert offline.candidates and all(c.verify_only for c in offline.candidates)
    first = offline.candidates[0].doi
    with _simulator([first]) as sim:
        [checked] = repair([cell], config=FAST, base_url=sim.url)
    assert (checked.suggestion, checked.verified) == (first, True)


def test_verified_truncation_keeps_the_longest_cut_that_exists_in_bounded_requests():
    cell = "10.4321/abc\\def(ghi"
    with _simulator(["10.4321/abc\\def", "10.4321/abc"]) as sim:
        [result] = repair([cell], config=FAST, base_url=sim.url)
    assert (result.suggestion, result.verified) == ("10.4321/abc\\def", True)
    assert "truncation" in result.rule
    # A cell full of places to cut costs at most its own check and MAX_CANDIDATES requests.
    noisy = "10.4321/a" + "".join(f"#{i}|{i}" for i in range(30))
    [truncation] = [rule for rule in RULES if rule.name == "truncation"]
    assert len(list(truncation.transform(noisy))) == MAX_CUTS
    with _simulator([]) as sim:
        stats = RepairStats()
        [nothing] = repair([noisy], config=FAST, base_url=sim.url, stats=stats)
    assert nothing.verified is not True
    assert stats.resolver.requests <= 1 + MAX_CANDIDATES


def test_a_value_whose_own_doi_exists_is_never_repaired():
    with _simulator(["10.1000/abc.", "10.1000/abc"]) as sim:
        [kept, fixed] = repair(["10.1000/abc.", "10.1000/xyz."], config=FAST, base_url=sim.url)
    assert (kept.suggestion, kept.rule, kept.verified, kept.own_status) == (
        None, None, None, "resolved"
    )
    assert kept.candidates  # there were candidates; the proxy said the value is fine
    assert (fixed.suggestion, fixed.verified) == ("10.1000/xyz", False)


def test_the_first_existing_candidate_wins_and_ocr_only_when_verified():
    with _simulator(["10.1016/j.aca.2006.07.086"]) as sim:
        ocr, ghost = repair(
            ["10.1O16/j.aca.2006.O7.086", "10.9O99/nothing"], config=FAST, base_url=sim.url
        )
    assert (ocr.suggestion, ocr.rule, ocr.verified) == (
        "10.1016/j.aca.2006.07.086", "ocr_digit", True
    )
    assert (ghost.suggestion, ghost.verified) == (None, None)  # an OCR guess is never shown


def test_no_verify_sends_nothing_and_marks_unchecked():
    with _simulator([]) as sim:
        results = repair(
            ["10.1000/abc.", "10.1O16/x", None], verify=False, config=FAST, base_url=sim.url
        )
        assert sim.stats()["requests"] == 0
    assert [r.as_row() for r in results] == [
        dict(zip(REPAIR_COLUMNS, ("10.1000/abc", "trailing_punctuation", None), strict=True)),
        dict.fromkeys(REPAIR_COLUMNS),
        dict.fromkeys(REPAIR_COLUMNS),
    ]
    assert repair_columns(results) == {
        "doi_suggestion": ["10.1000/abc", None, None],
        "doi_suggestion_rule": ["trailing_punctuation", None, None],
        "doi_suggestion_verified": [None, None, None],
    }


def test_proxy_failure_leaves_rows_undecided_never_repaired():
    with ProxySimulator(make_records(["10.1000/abc"]), faults={"always_500": True}) as sim:
        own_valid, own_invalid = repair(
            ["10.1000/abc.", "1000/abc"], config=FAST, base_url=sim.url, max_attempts=2
        )
    assert own_valid.suggestion is None and own_valid.verified is None
    assert "could not check whether the value's own DOI exists" in (own_valid.error or "")
    assert own_invalid.suggestion == "10.1000/abc" and own_invalid.verified is None
    assert own_invalid.error and own_invalid.error.startswith("could not check 10.1000/abc")


def test_async_twin_and_lazy_export_agree():
    import asyncio

    import airflow_doi.repair as module
    from airflow_doi.repair.verify import arepair

    assert module.repair is repair and module.arepair is arepair
    with _simulator(["10.1038/nature14129"]) as sim:
        got = asyncio.run(arepair(["1038/nature14129."], config=FAST, base_url=sim.url))
    assert got[0].as_row() == dict(zip(
        REPAIR_COLUMNS, ("10.1038/nature14129", got[0].rule, True), strict=True
    ))
    assert set(got[0].rule.split("+")) == {"lost_directory", "trailing_punctuation"}


def test_cache_makes_a_second_run_free(tmp_path):
    cache = tmp_path / "cache.sqlite"
    with _simulator(["10.1038/nature14129"]) as sim:
        first = repair(["1038/nature14129"], config=FAST, base_url=sim.url, cache=cache)
        before = sim.stats()["requests"]
        second = repair(["1038/nature14129"], config=FAST, base_url=sim.url, cache=cache)
        assert sim.stats()["requests"] == before
    assert first[0].as_row() == second[0].as_row()
    assert second[0].verified is True


# -- the CLI ---------------------------------------------------------------------------------

def _cli(argv):

    parser = argparse.ArgumentParser(prog="airflow-doi")
    command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_csv_keeps_every_row_and_column(tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_text(
        'id,ref,note\n00123,10.3748/wjg.v10.i5.707.,"a, b"\n2,1038/nature14129,\n3,,x\n'
        "4,10.1000/abc,ok\n",
        encoding="utf-8",
    )
    target = tmp_path / "out.csv"
    with _simulator(["10.3748/wjg.v10.i5.707", "10.1038/nature14129", "10.1000/abc"]) as sim:
        code = _cli(["repair", str(source), "--column", "ref", "-o", str(target),
                     "--base-url", sim.url, "--rate", "500"])
    assert code == 0
    table = pcsv.read_csv(target, convert_options=pcsv.ConvertOptions(
        column_types={"id": pa.string(), "doi_suggestion_verified": pa.string()},
        strings_can_be_null=True))
    assert table.column_names == ["id", "ref", "note", *added_columns()]
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == ["00123", "2", "3", "4"]
    assert rows[0]["note"] == "a, b"
    assert [r["doi_suggestion"] for r in rows] == [
        "10.3748/wjg.v10.i5.707", "10.1038/nature14129", None, None
    ]
    assert [r["doi_suggestion_verified"] for r in rows] == ["true", "true", None, None]
    assert "2 verified" in capsys.readouterr().err


def test_cli_parquet_no_verify(tmp_path):
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"n": [1, 2], "doi": ["doi:doi:10.1000/x.", "10.1000/y"]}), source)
    target = tmp_path / "out.parquet"
    assert _cli(["repair", str(source), "--column", "doi", "-o", str(target), "--no-verify"]) == 0
    table = pq.read_table(target)
    assert table.column_names == ["n", "doi", *added_columns()]
    assert table.column("n").to_pylist() == [1, 2]
    assert table.column("doi_suggestion").to_pylist() == ["10.1000/x", None]
    assert table.schema.field("doi_suggestion_verified").type == pa.bool_()
    assert table.column("doi_suggestion_verified").to_pylist() == [None, None]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--column", "nope"], "no column 'nope'"),
        (["--column", "doi", "--rate", "0"], "rate"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path, capsys, argv, message):
    source = tmp_path / "in.csv"
    source.write_text("doi,doi_suggestion\n10.1000/x.,\n", encoding="utf-8")
    target = tmp_path / "out.csv"
    code = _cli(["repair", str(source), "-o", str(target), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "airflow-doi repair: error:" in err
    assert "Traceback" not in err
    assert not target.exists()


def test_cli_missing_file_exits_2(tmp_path, capsys):
    code = _cli(["repair", str(tmp_path / "none.csv"), "--column", "doi", "-o",
                 str(tmp_path / "o.csv")])
    assert code == 2
    assert "no such file" in capsys.readouterr().err


def _dead_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(*argv):
    return forked.run([sys.executable, "-m", "airflow_doi", "repair", *map(str, argv)],
                      capture_output=True, text=True, timeout=120)


def test_cli_dead_proxy_ends_bounded_undecided_and_exits_3(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("id,doi\n1,10.1000/abc.\n2,1038/nature14129\n3,10.1000/ok\n")
    target = tmp_path / "out.csv"
    fast = ["--backoff-base", "0.01", "--breaker-give-up", "1", "--timeout", "2"]
    started = time.monotonic()
    run = _run(source, "--column", "doi", "-o", target,
               "--base-url", f"http://127.0.0.1:{_dead_port()}", *fast)
    assert time.monotonic() - started < 60
    assert run.returncode == 3, run.stderr
    # Nothing ever answered: one error line, with the way out (not the share of rows again).
    [said] = [line for line in run.stderr.splitlines() if ": error: " in line]
    assert said.startswith("airflow-doi repair: error: nothing at ")
    assert said.endswith("; or pass --no-verify for the suggestions without the proxy")
    assert "Traceback" not in run.stderr
    rows = list(csv.DictReader(target.open(encoding="utf-8")))
    assert [r["id"] for r in rows] == ["1", "2", "3"]  # still written, every row
    assert all(r["doi_suggestion_verified"] == "" for r in rows)  # never "repaired"
    assert rows[0]["doi_suggestion"] == ""  # its own DOI may exist: left alone
    assert rows[1]["doi_suggestion_error"].startswith("could not check 10.1038/nature14129")
    # --max-error-share 1 accepts it: exit 0, the same rows
    again = _run(source, "--column", "doi", "-o", target,
                 "--base-url", f"http://127.0.0.1:{_dead_port()}", *fast,
                 "--max-error-share", "1")
    assert again.returncode == 0, again.stderr


def test_cli_escapes_formulas_in_user_columns_only_when_asked(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text("doi,note\n10.1000/abc.,=1+1\n")
    plain, safe = tmp_path / "plain.csv", tmp_path / "safe.csv"
    assert _run(source, "--column", "doi", "-o", plain, "--no-verify").returncode == 0
    assert _run(source, "--column", "doi", "-o", safe, "--no-verify",
                "--escape-formulas").returncode == 0
    [row] = csv.DictReader(plain.open(encoding="utf-8"))
    assert row["note"] == "=1+1" and row["doi_suggestion"] == "10.1000/abc"
    [row] = csv.DictReader(safe.open(encoding="utf-8"))
    assert row["note"] == "'=1+1" and row["doi_suggestion"] == "10.1000/abc"


# -- shortDOIs (issue 34) ------------------------------------------------------------------

def test_a_short_doi_is_expanded_and_verified_never_guessed_offline(tmp_path):
    target = "10.1016/S0933-3657(96)00367-3"
    with _simulator([target]) as sim:
        short = sim.short_doi(target)
        ghost = sim.short_doi("10.5555/ghost")  # aliases a DOI the proxy does not know
        stats = RepairStats()
        found, missing, aliased_ghost, spelled = repair(
            [short, "10/nothere1", ghost, f"https://doi.org/{short.upper()}"],
            config=FAST, base_url=sim.url, stats=stats)
        offline = repair([short], verify=False)
        assert sim.stats()["by_key"].get(ascii_upper(short)) == 1  # one lookup, two rows
    assert (found.suggestion, found.rule, found.verified, found.short_doi) == (
        target, "short_doi", True, short)
    assert (spelled.suggestion, spelled.verified) == (target, True)
    assert (missing.suggestion, missing.verified, missing.error) == (None, None, None)
    assert (aliased_ghost.suggestion, aliased_ghost.verified) == ("10.5555/ghost", False)
    assert "4 shortDOIs looked up" not in stats.summary()  # three distinct ones
    assert "3 shortDOIs looked up" in stats.summary()
    assert [(r.suggestion, r.verified, r.short_doi) for r in offline] == [(None, None, short)]


def test_cli_repair_expands_a_short_doi(tmp_path, capsys):
    target = "10.1016/S0933-3657(96)00367-3"
    source = tmp_path / "in.csv"
    with _simulator([target]) as sim:
        short = sim.short_doi(target)
        source.write_text(f"id,doi\n1,{short}\n2,10.1000/abc\n", encoding="utf-8")
        code = _cli(["repair", str(source), "--column", "doi", "-o", str(tmp_path / "out.csv"),
                     "--base-url", sim.url, "--rate", "500"])
    assert code == 0, capsys.readouterr().err
    rows = list(csv.DictReader((tmp_path / "out.csv").open(encoding="utf-8")))
    assert [(r["doi_suggestion"], r["doi_suggestion_rule"], r["doi_suggestion_verified"])
            for r in rows] == [(target, "short_doi", "true"), ("", "", "")]
