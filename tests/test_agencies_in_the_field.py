"""The batch path as the agencies really behave (#40): DataCite's case-sensitive index,
CSL's types whichever source answered, Crossref's pools, existence a batch at a time."""

from __future__ import annotations

from typing import Any

from airflow_doi.metadata import MetadataStats, fetch
from airflow_doi.resolver.agencies import work_for
from airflow_doi.resolver.simulator import ProxySimulator
from tests import forked


def _options(sim: ProxySimulator, **more: Any) -> dict[str, Any]:
    return {"base_url": sim.url, "metadata_hosts": sim.metadata_hosts,
            "crossref_url": sim.crossref_url, "datacite_url": sim.datacite_url,
            "rate": 1000, "agency_rate": 1000, "list_rate": 1000, **more}


def test_datacite_keys_written_in_any_case_are_found_by_the_batch_lookup() -> None:
    """DataCite's `doi:` field matches only the upper-cased DOI (datacite#2115): the DOIs
    people write (lower case, as DataCite's pages show them) must still be found there, not
    fall to content negotiation at two requests a key."""
    works = [w for w in (work_for(f"10.5555/dc.{i}") for i in range(200))
             if w.agency == "datacite"][:20]
    spelled = [w.doi.lower() for w in works[:10]] + [w.doi.upper() for w in works[10:15]] + [
        w.doi[:12] + w.doi[12:].upper() for w in works[15:]]
    with ProxySimulator(auto_records=True) as sim:
        stats = MetadataStats()
        results = fetch(spelled, stats=stats, **_options(sim))
        negotiated = set(sim.cn_by_key)
    assert {r.metadata_source for r in results} == {"datacite"}, stats.summary()
    assert not negotiated & {w.doi.upper() for w in works}
    assert stats.sources.counts["datacite"].requests == 1


def test_csl_type_is_a_csl_type_from_every_source_and_registry_type_the_registrys_word() -> None:
    """Crossref's content negotiation names most types its own way (journal-article): the
    negotiated key's csl_type is CSL's, as its list query's is, and registry_type keeps
    Crossref's word (DataCite's resourceTypeGeneral) whichever path a key took."""
    from airflow_doi.metadata.csl import CSL_TYPES
    from airflow_doi.resolver.agencies import registry_type_of_work

    works = [work_for(f"10.5555/ty.{i}") for i in range(120)]
    works = [w for w in works if w.agency in ("crossref", "datacite", "medra")][:60]
    with ProxySimulator(auto_records=True) as sim:
        negotiated = fetch([w.doi for w in works], source="negotiation", **_options(sim))
        batched = fetch([w.doi for w in works], **_options(sim))
    assert {r.metadata_source for r in negotiated} == {"negotiation"}
    assert {r.metadata_source for r in batched} >= {"crossref", "datacite"}
    for work, slow, fast in zip(works, negotiated, batched, strict=True):
        assert slow.csl_type == fast.csl_type == work.csl_type, work.doi
        assert slow.csl_type in CSL_TYPES
        assert slow.registry_type == fast.registry_type == registry_type_of_work(work), work.doi
    assert {r.registry_type for r in negotiated if r.agency is None} >= {"journal-article"}


def test_a_placeholder_contact_is_refused_before_anything_is_sent(tmp_path: Any) -> None:
    import sys

    (tmp_path / "in.csv").write_text("doi\n10.5555/one\n")
    with ProxySimulator(auto_records=True) as sim:
        for contact, said in (("you@example.org", "is a placeholder"),
                              ("team@", "is not an e-mail address")):
            done = forked.run(
                [sys.executable, "-m", "airflow_doi", "enrich", "in.csv", "-o", "out.csv",
                 "--base-url", sim.url, "--contact", contact], cwd=tmp_path,
                capture_output=True, text=True, timeout=120)
            assert done.returncode == 2, done.stderr
            assert f"--contact {contact!r} {said}" in done.stderr, done.stderr
            assert "Traceback" not in done.stderr and not (tmp_path / "out.csv").exists()
        assert sim.stats()["requests"] == sim.stats()["cn_requests"] == 0


def test_the_defaults_follow_crossrefs_pool_and_each_address_keeps_its_own_pace() -> None:
    from airflow_doi.metadata import MetadataConfig

    crossref = "https://api.crossref.org"
    public = MetadataConfig()
    polite = MetadataConfig(contact="metadata@lib.example-uni.edu")
    other = MetadataConfig(contact="ops@archive.example-uni.edu")
    assert (public.host_config(crossref, "list").rate, public.host_config(crossref).rate) == (
        1.0, 5.0)
    assert (polite.host_config(crossref, "list").rate, polite.host_config(crossref).rate) == (
        3.0, 10.0)
    datacite = "https://api.datacite.org"
    assert (polite.host_config(datacite, "list").rate, polite.host_config(datacite).rate) == (
        1.0, 2.0)
    assert MetadataConfig(contact="a@lib.example-uni.edu", list_rate=0.5).host_config(
        crossref, "list").rate == 0.5  # what is set wins
    spaces = {c.host_config(crossref, "list").redis_namespace for c in (public, polite, other)}
    assert len(spaces) == 3  # Crossref counts per address: one shared pace per address


def test_crossrefs_pool_is_read_from_its_answers_and_its_limit_kept() -> None:
    works = [w for w in (work_for(f"10.5555/pool.{i}") for i in range(400))
             if w.agency == "crossref"][:200]
    with ProxySimulator(auto_records=True, crossref_pools=True) as sim:
        for contact, pool, limit in (("metadata@lib.example-uni.edu", "polite", "3"),
                                     (None, "public", "1")):
            sim.reset_counts()
            stats = MetadataStats()
            options = _options(sim, contact=contact, list_size=20)
            del options["list_rate"]  # the pool's own default
            results = fetch([w.doi for w in works[:100]], stats=stats, **options)
            seen = sim.stats()
            assert {r.metadata_source for r in results} == {"crossref"}
            host = sim.crossref_url.split("//")[1]
            assert stats.source_health.pools[host] == f"{pool}, {limit} per 1s (list)"
            assert seen["list_throttled"] == 0 and seen["list_over_announced"] == 0, seen
