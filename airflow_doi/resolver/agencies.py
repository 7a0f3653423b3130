"""Simulated registration agencies: works, their CSL-JSON, and the servers that send it.

The proxy simulator (:mod:`airflow_doi.resolver.simulator`) answers DOI content negotiation
with a redirect to one of these, as doi.org does. Each agency has its own flavour of CSL-JSON,
written here after the public CSL schema and the agencies' documentation, in our own words and
with made-up works:

* ``crossref``: journal articles at ``/v1/works/{DOI}/transform``, with ISSNs, licences, a
  reference list, and ``updated-by`` / ``update-to`` for retractions and corrections;
* ``datacite``: datasets at ``/application/vnd.citationstyles.csl+json/{DOI}``, often by an
  organisation (a ``literal`` author), with ``copyright`` instead of a licence;
* ``medra``: book chapters at ``/{DOI}``, with ISBNs, page ranges and editors;
* ``nocn``: an agency without content negotiation: 406 to every request.

Crossref's works are also served as records of its REST API's list queries
(:func:`crossref_item_for`: Crossref's own type names, titles as lists with face markup and
entities, empty ``container-title`` lists, ``[[null]]`` dates, organisations as ``name``, an
ISSN without its hyphen, an update link to the record itself), and DataCite's as JSON:API
records of its ``/dois`` batch lookup (:func:`datacite_record_for`), after the public schemas
and documentation, in our own words.

A :class:`Work` describes a record independently of CSL; :func:`csl_for` renders it and
:func:`expected_metadata` gives the typed columns a correct reader must produce, so tests
compare against the work, not against our own parser. Special DOIs (:data:`HOSTILE_WORKS`)
misbehave on purpose: HTML with status 200, JSON cut short, cp1252 bytes, wrong types, a
10 MB body, nesting 1,000 deep, redirect loops, redirects off the allowlist or to http, 429
with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from airflow_doi.resolver.config import DEFAULT_PROXY_URL
from airflow_doi.syntax import ascii_upper

__all__ = [
    "AGENCIES",
    "FAULTS",
    "HOSTILE_WORKS",
    "RA_NAMES",
    "SHOWCASE_WORKS",
    "Work",
    "agency_path",
    "crossref_item_for",
    "csl_for",
    "datacite_record_for",
    "expected_metadata",
    "work_for",
    "work_from_record",
]

#: Agencies served, in port order.
AGENCIES: Final[tuple[str, ...]] = ("crossref", "datacite", "medra", "nocn")
#: What doi.org's Which RA? says of each agency's DOIs.
RA_NAMES: Final[dict[str, str]] = {
    "crossref": "Crossref", "datacite": "DataCite", "medra": "mEDRA", "nocn": "JaLC",
}
#: The misbehaviours a work can carry (``Work.fault``).
FAULTS: Final[tuple[str, ...]] = (
    "html_200", "truncated", "latin1", "wrong_types", "huge", "deep", "redirect_loop",
    "redirect_offlist", "redirect_http", "throttle", "not_json_object", "status_500",
)
#: Media types each agency answers with.
MEDIA_TYPES: Final[dict[str, str]] = {
    "crossref": "application/vnd.citationstyles.csl+json; charset=utf-8",
    "datacite": "application/vnd.citationstyles.csl+json",
    "medra": "application/vnd.citationstyles.csl+json",
}


@dataclass(frozen=True)
class Work:
    """One registered work, as an agency's database would hold it."""

    doi: str
    agency: str = "crossref"
    csl_type: str = "article-journal"
    title: str = "Untitled"
    issued: tuple[int, ...] = (2020,)
    container_title: str | None = None
    publisher: str | None = None
    issn: tuple[str, ...] = ()
    isbn: tuple[str, ...] = ()
    volume: str | None = None
    issue: str | None = None
    page: str | None = None
    #: ``(family, given)`` pairs, or a plain text for an organisation; None: no author list.
    authors: tuple[tuple[str, str] | str, ...] | None = ()
    language: str | None = None
    license_url: str | None = None
    updated_by: tuple[tuple[str, str], ...] = ()
    update_to: tuple[tuple[str, str], ...] = ()
    fault: str | None = None


_ADJECTIVES = ("Coastal", "Early", "Silent", "Urban", "Northern", "Hidden", "Rapid", "Open",
               "Shifting", "Quiet", "Layered", "Distant")
_NOUNS = ("Wetlands", "Glaciers", "Archives", "Networks", "Markets", "Forests", "Harbours",
          "Languages", "Soils", "Orchards", "Bridges", "Lichens")
_TOPICS = ("Memory", "Drought", "Migration", "Trade", "Erosion", "Pollination", "Literacy",
           "Salinity", "Kinship", "Navigation")
_JOURNALS = (("Journal of Imagined Ecology", "Fernleaf Academic"),
             ("Annals of Made-up Studies", "Quayside Press"),
             ("Review of Example Sciences", "Lantern House Publishing"),
             ("Transactions on Placeholder Data", "Fernleaf Academic"))
_FAMILIES = ("Okafor", "Lindqvist", "Haddad", "Moreau", "Tanaka", "Novak", "Quispe", "Byrne",
             "Achterberg", "Silva")
_GIVEN = ("Ada", "Bo", "Chiara", "Dmitri", "Esi", "Farid", "Greta", "Hiro", "Ines", "Jonas")
_REPOSITORIES = (("Example Data Repository", "Open Shelf Data Service"),
                 ("Commons of Imaginary Measurements", "Institute for Pretend Research"))
_BOOKS = (("Handbook of Invented Methods", "Editrice Esempio"),
          ("Essays on Fictional Landscapes", "Casa Editrice Immaginaria"))


def _isbn13(number: int) -> str:
    digits = f"978{number % 10**9:09d}"
    check = (10 - sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10) % 10
    return f"{digits}{check}"


def _issn(number: int) -> str:
    digits = f"{number % 10**7:07d}"
    total = sum(int(d) * (8 - i) for i, d in enumerate(digits))
    check = (11 - total % 11) % 11
    return f"{digits[:4]}-{digits[4:]}{'X' if check == 10 else check}"


def work_for(doi: str) -> Work:
    """A deterministic, varied work for any DOI (keyed on its Z39.84 comparison key)."""
    h = int.from_bytes(hashlib.sha256(ascii_upper(doi).encode("utf-8")).digest()[:16], "big")
    bucket, h = h % 100, h // 100

    def pick(seq: tuple[Any, ...], n: int) -> Any:
        return seq[n % len(seq)]

    title = (f"{pick(_ADJECTIVES, h)} {pick(_NOUNS, h >> 4)} and the {pick(_TOPICS, h >> 8)} "
             f"of {pick(_NOUNS, h >> 12)}")
    parts = (2000 + (h >> 16) % 26, 1 + (h >> 22) % 12, 1 + (h >> 26) % 28)[: 1 + (h >> 31) % 3]
    people = tuple((pick(_FAMILIES, h >> (33 + 3 * i)), pick(_GIVEN, h >> (34 + 3 * i)))
                   for i in range((h >> 48) % 5))
    if bucket < 65:
        journal, publisher = pick(_JOURNALS, h >> 52)
        issns = tuple(_issn((h >> 56) + i * 7919) for i in range((h >> 60) % 3))
        special = (h >> 64) % 50
        return Work(
            doi=doi, agency="crossref", csl_type="article-journal", title=title, issued=parts,
            container_title=journal, publisher=publisher, issn=issns,
            volume=str(1 + (h >> 70) % 60), issue=str(1 + (h >> 76) % 12),
            page=f"{1 + (h >> 80) % 300}-{301 + (h >> 80) % 300}", authors=people,
            language="en",
            license_url="https://creativecommons.org/licenses/by/4.0/" if (h >> 90) % 2 else None,
            updated_by=((("retraction", f"10.5555/notice.{(h >> 92) % 10**6}"),) if special == 0
                        else (("correction", f"10.5555/erratum.{(h >> 92) % 10**6}"),)
                        if special == 1 else ()),
        )
    if bucket < 85:
        repository, publisher = pick(_REPOSITORIES, h >> 52)
        authors: tuple[tuple[str, str] | str, ...] = (
            (publisher,) if (h >> 58) % 2 else people)
        return Work(doi=doi, agency="datacite", csl_type="dataset",
                    title=f"Measurements of {pick(_NOUNS, h >> 4)} ({pick(_TOPICS, h >> 8)})",
                    issued=parts[:1], container_title=repository if (h >> 60) % 2 else None,
                    publisher=publisher, authors=authors, language="en")
    if bucket < 97:
        book, publisher = pick(_BOOKS, h >> 52)
        isbns = tuple(_isbn13((h >> 56) + i * 104729) for i in range(1 + (h >> 62) % 2))
        start = 1 + (h >> 64) % 400
        return Work(doi=doi, agency="medra", csl_type="chapter", title=title, issued=parts,
                    container_title=book, publisher=publisher, isbn=isbns,
                    volume=str(1 + (h >> 84) % 9),
                    page=f"{start}-{start + 10 + (h >> 72) % 30}", authors=people or None,
                    language="it" if (h >> 80) % 2 else "en")
    return Work(doi=doi, agency="nocn", csl_type="report", title=title, issued=parts)


#: Fixed works for documentation and tests: one of each kind.
SHOWCASE_WORKS: Final[tuple[Work, ...]] = (
    Work("10.5555/showcase.article", "crossref", "article-journal",
         "Tidal Memory in Coastal Wetlands", (2019, 5), "Journal of Imagined Ecology",
         "Fernleaf Academic", ("1234-5679", "2049-3630"), (), "12", "3", "101-119",
         (("Okafor", "Ada"), ("Lindqvist", "Bo")), "en",
         "https://creativecommons.org/licenses/by/4.0/"),
    Work("10.5555/showcase.dataset", "datacite", "dataset",
         "Soil Salinity Measurements, 2010-2020", (2021,), None, "Open Shelf Data Service",
         authors=("Institute for Pretend Research",), language="en"),
    Work("10.5555/showcase.chapter", "medra", "chapter", "Mapping Invented Rivers", (2018, 11, 2),
         "Handbook of Invented Methods", "Editrice Esempio", (), ("9781234567897",),
         page="45-67", authors=(("Moreau", "Chiara"),), language="it"),
    Work("10.5555/showcase.retracted", "crossref", "article-journal",
         "Rapid Glaciers and the Trade of Orchards", (2020, 2, 14),
         "Annals of Made-up Studies", "Quayside Press", ("0317-8471",), (), "7", "1", "1-20",
         (("Haddad", "Farid"),), "en",
         updated_by=(("retraction", "10.5555/showcase.notice"),)),
    Work("10.5555/showcase.notice", "crossref", "article-journal",
         "Retraction notice: Rapid Glaciers and the Trade of Orchards", (2022, 6),
         "Annals of Made-up Studies", "Quayside Press", ("0317-8471",), (), "9", "2", "200",
         authors=None, language="en",
         update_to=(("retraction", "10.5555/showcase.retracted"),)),
    Work("10.5555/showcase.corrected", "crossref", "article-journal",
         "Quiet Harbours and the Literacy of Bridges", (2017,), "Review of Example Sciences",
         "Lantern House Publishing", (), (), "3", None, "55-70", (("Novak", "Jonas"),), "en",
         updated_by=(("correction", "10.5555/showcase.erratum"),)),
    Work("10.5555/showcase.nocn", "nocn", "report", "A Report Without Negotiation", (2016,)),
    # Records as they come: an organisation named only, no journal (an empty list in the
    # list query), no date at all ([[null]]), a preprint (Crossref's "posted-content").
    Work("10.5555/showcase.preprint", "crossref", "article", "Layered Soils & the Salinity of "
         "Markets", (), None, "Quayside Press",
         authors=("The Pretend Soil Consortium", ("Silva", "Ines")), language="en"),
    # A correction notice whose update links include the notice itself.
    Work("10.5555/showcase.erratum", "crossref", "article-journal",
         "Correction to: Quiet Harbours and the Literacy of Bridges", (2018, 1),
         "Review of Example Sciences", "Lantern House Publishing", ("12345679",), (), "4",
         None, "12", authors=None, language="en",
         update_to=(("correction", "10.5555/showcase.corrected"),)),
    Work("10.5555/showcase.dataset.2", "datacite", "dataset",
         "Harbour Depths, 1990-2020", (2020, 7, 1), "Commons of Imaginary Measurements",
         "Institute for Pretend Research", authors=(("Tanaka", "Hiro"), ("Byrne", "Esi")),
         language="en"),
)
#: One DOI per fault: ``10.5555/hostile.<fault>`` (a journal article otherwise).
HOSTILE_WORKS: Final[dict[str, Work]] = {
    fault: replace(SHOWCASE_WORKS[0], doi=f"10.5555/hostile.{fault}", fault=fault)
    for fault in FAULTS
}


def work_from_record(doi: str, record: Mapping[str, Any]) -> Work:
    """The work of a simulator record: its ``work`` (Work fields), else :func:`work_for`;
    a record's ``agency`` or ``fault`` win over the derived ones."""
    given = record.get("work")
    if isinstance(given, Work):
        work = replace(given, doi=doi)
    elif isinstance(given, Mapping):
        names = {f.name for f in fields(Work)}
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                  for k, v in given.items() if k in names and k != "doi"}
        for name in ("authors", "updated_by", "update_to"):
            if isinstance(values.get(name), tuple):
                values[name] = tuple(tuple(i) if isinstance(i, list) else i
                                     for i in values[name])
        work = Work(doi=doi, **values)
    else:
        work = _FIXED.get(ascii_upper(doi)) or work_for(doi)
    overrides = {k: record[k] for k in ("agency", "fault") if isinstance(record.get(k), str)}
    return replace(work, **overrides) if overrides else work


_FIXED: Final[dict[str, Work]] = {
    ascii_upper(w.doi): w for w in (*SHOWCASE_WORKS, *HOSTILE_WORKS.values())
}


def agency_path(agency: str, encoded_doi: str) -> str:
    """The path of a DOI's record at its agency (the DOI already percent-encoded)."""
    if agency == "crossref":
        return f"/v1/works/{encoded_doi}/transform"
    if agency == "datacite":
        return f"/application/vnd.citationstyles.csl+json/{encoded_doi}"
    return f"/{encoded_doi}"


def _date(parts: tuple[int, ...]) -> dict[str, Any]:
    """A CSL (and Crossref) date; a work without one gets ``[[null]]``, as agencies send it."""
    return {"date-parts": [list(parts) if parts else [None]]}


def _people(authors: tuple[tuple[str, str] | str, ...]) -> list[dict[str, Any]]:
    people: list[dict[str, Any]] = []
    for index, author in enumerate(authors):
        if isinstance(author, str):
            people.append({"literal": author})
        else:
            family, given = author
            person: dict[str, Any] = {"family": family, "given": given}
            person["sequence"] = "first" if index == 0 else "additional"
            people.append(person)
    return people


def _updates(items: tuple[tuple[str, str], ...], when: tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"type": kind, "DOI": doi, "label": kind.capitalize(), "updated": _date(when)}
            for kind, doi in items]


def _marked_up(title: str) -> str:
    """A title as Crossref keeps it: face markup on its last word, ``&`` as an entity."""
    head, _, last = title.rpartition(" ")
    marked = f"{head} <i>{last}</i>" if head else f"<i>{last}</i>"
    return marked.replace("&", "&amp;")


def _update_links(work: Work) -> list[dict[str, Any]]:
    """``update-to`` as Crossref sends a notice's: its targets, and (as real notices do) a
    link to the notice itself, which a reader must leave out."""
    links = _updates(work.update_to, work.issued)
    if links:
        links.append({"type": work.update_to[0][0], "DOI": work.doi,
                      "label": work.update_to[0][0].capitalize(), "updated": _date(work.issued)})
    return links


def csl_for(work: Work) -> dict[str, Any]:
    """The CSL-JSON object the work's agency sends."""
    title = _marked_up(work.title) if work.agency == "crossref" else work.title
    # Crossref's content negotiation names most types its own way (journal-article), as its
    # REST API does; the other agencies send CSL's.
    kind = (_CROSSREF_TYPE_NAMES.get(work.csl_type, work.csl_type) if work.agency == "crossref"
            else work.csl_type)
    csl: dict[str, Any] = {"type": kind, "title": title, "DOI": work.doi,
                           "issued": _date(work.issued)}
    doi_url = f"{DEFAULT_PROXY_URL}/{work.doi}"
    if work.agency == "crossref":
        created = work.issued[0] if work.issued else 2000
        csl.update({
            "source": "Crossref", "URL": doi_url,
            "published-print": _date(work.issued),
            "created": {"date-parts": [[created, 1, 1]], "timestamp": 1_600_000_000_000},
            "reference-count": 3,
            "reference": [{"key": f"ref{i}", "unstructured": f"Cited work number {i}."}
                          for i in range(1, 4)],
        })
        if work.container_title:
            csl["container-title"] = work.container_title
        if work.issn:  # one ISSN comes as a plain string, several as a list
            csl["ISSN"] = work.issn[0] if len(work.issn) == 1 else list(work.issn)
        if work.isbn:
            csl["ISBN"] = list(work.isbn)
        if work.license_url:
            csl["license"] = [
                {"URL": "https://example.org/text-mining-terms", "content-version": "tdm",
                 "start": _date(work.issued)},
                {"URL": work.license_url, "content-version": "vor", "start": _date(work.issued)},
            ]
        if work.updated_by:
            csl["updated-by"] = _updates(work.updated_by, work.issued)
        if work.update_to:
            csl["update-to"] = _update_links(work)
    elif work.agency == "datacite":
        csl.update({"id": doi_url, "URL": doi_url,
                    "copyright": "Creative Commons Attribution 4.0 International",
                    "abstract": f"Observations behind {work.title.lower()}.", "version": "1.0"})
        if work.container_title:  # a repository, as a one-item list
            csl["container-title"] = [work.container_title]
        if work.issn:
            csl["ISSN"] = list(work.issn)
        if work.isbn:
            csl["ISBN"] = list(work.isbn)
    else:
        if work.container_title:
            csl["container-title"] = work.container_title
        if work.isbn:
            csl["ISBN"] = list(work.isbn)
        if work.issn:
            csl["ISSN"] = list(work.issn)
        csl["editor"] = [{"family": "Achterberg", "given": "Greta"}]
    for name, value in (("publisher", work.publisher), ("issue", work.issue),
                        ("page", work.page), ("language", work.language)):
        if value is not None:
            csl[name] = value
    if work.volume is not None:  # mEDRA-style numbers as numbers
        csl["volume"] = int(work.volume) if work.agency == "medra" and work.volume.isdigit() \
            else work.volume
    if work.authors is not None:
        csl["author"] = _people(work.authors)
    return csl


#: CSL types -> Crossref's own names, as its REST API writes them.
_CROSSREF_TYPE_NAMES: Final[dict[str, str]] = {
    "article-journal": "journal-article", "chapter": "book-chapter", "article": "posted-content",
    "paper-conference": "proceedings-article", "dataset": "dataset", "book": "book",
    "report": "report",
}


#: CSL types -> DataCite's resourceTypeGeneral, as its records write them.
_RESOURCE_TYPE_NAMES: Final[dict[str, str]] = {
    "dataset": "Dataset", "article-journal": "JournalArticle", "chapter": "BookChapter",
    "book": "Book", "software": "Software", "report": "Report", "article": "Preprint",
}


def registry_type_of_work(work: Work) -> str:
    """The registry's own word for a work's type (Crossref's, DataCite's
    resourceTypeGeneral, any other agency's CSL type)."""
    if work.agency == "crossref":
        return _CROSSREF_TYPE_NAMES.get(work.csl_type, "other")
    if work.agency == "datacite":
        return _RESOURCE_TYPE_NAMES.get(work.csl_type, "Text")
    return work.csl_type


def crossref_item_for(work: Work) -> dict[str, Any]:
    """The work as a record of Crossref's REST API (``/works``: its list queries' items)."""
    doi_url = f"{DEFAULT_PROXY_URL}/{work.doi}"
    created = work.issued[0] if work.issued else 2000
    item: dict[str, Any] = {
        "indexed": {"date-parts": [[2025, 1, 2]], "date-time": "2025-01-02T06:40:00Z",
                    "timestamp": 1_735_800_000_000},
        "reference-count": 3, "publisher": work.publisher, "content-domain":
        {"domain": [], "crossmark-restriction": False}, "short-container-title": [],
        "DOI": work.doi.lower(), "type": _CROSSREF_TYPE_NAMES.get(work.csl_type, "other"),
        "created": {"date-parts": [[created, 1, 1]], "timestamp": 1_600_000_000_000},
        "source": "Crossref", "is-referenced-by-count": 0,
        "title": [_marked_up(work.title)], "prefix": work.doi.partition("/")[0],
        "member": "99999", "container-title":
        [work.container_title] if work.container_title else [],
        "issued": _date(work.issued), "published-print": _date(work.issued),
        "URL": doi_url, "score": 1,
    }
    if work.publisher is None:
        del item["publisher"]
    if work.issn:  # a second ISSN without its hyphen, as some records carry it
        item["ISSN"] = [work.issn[0], *(i.replace("-", "") for i in work.issn[1:])]
        item["issn-type"] = [{"type": "print", "value": _issn_form(i)} for i in work.issn]
    if work.isbn:
        item["ISBN"] = list(work.isbn)
    for name, value in (("volume", work.volume), ("issue", work.issue), ("page", work.page),
                        ("language", work.language)):
        if value is not None:
            item[name] = value
    if work.authors is not None:
        item["author"] = [
            {"name": a, "sequence": "first" if i == 0 else "additional", "affiliation": []}
            if isinstance(a, str) else
            {"given": a[1], "family": a[0], "sequence": "first" if i == 0 else "additional",
             "affiliation": []}
            for i, a in enumerate(work.authors)
        ]
    if work.license_url:
        item["license"] = [
            {"start": _date(work.issued), "content-version": "tdm", "delay-in-days": 0,
             "URL": "https://example.org/text-mining-terms"},
            {"start": _date(work.issued), "content-version": "vor", "delay-in-days": 0,
             "URL": work.license_url},
        ]
    if work.updated_by:
        item["updated-by"] = _updates(work.updated_by, work.issued)
    if work.update_to:
        item["update-to"] = _update_links(work)
    return item


def datacite_record_for(work: Work) -> dict[str, Any]:
    """The work as a JSON:API record of DataCite's REST API (``/dois``)."""
    creators: list[dict[str, Any]] = []
    for author in work.authors or ():
        if isinstance(author, str):
            creators.append({"name": author, "nameType": "Organizational", "affiliation": [],
                             "nameIdentifiers": []})
        else:
            family, given = author
            creators.append({"name": f"{family}, {given}", "nameType": "Personal",
                             "givenName": given, "familyName": family, "affiliation": [],
                             "nameIdentifiers": []})
    issued = "-".join(f"{p:02d}" if i else f"{p:04d}" for i, p in enumerate(work.issued))
    container: dict[str, Any] = {}
    if work.container_title:
        container = {"type": "Journal" if work.issn else "DataRepository",
                     "title": work.container_title}
    for name, value in (("volume", work.volume), ("issue", work.issue)):
        if value is not None:
            container[name] = value
    if work.page is not None:
        first, _, last = work.page.partition("-")
        container.update({"firstPage": first, **({"lastPage": last} if last else {})})
    related = [{"relatedIdentifier": isbn, "relatedIdentifierType": "ISBN",
                "relationType": "IsPartOf"} for isbn in work.isbn]
    if work.issn:
        container.update(identifier=work.issn[0], identifierType="ISSN")
        related += [{"relatedIdentifier": issn, "relatedIdentifierType": "ISSN",
                     "relationType": "IsPartOf"} for issn in work.issn[1:]]
    attributes: dict[str, Any] = {
        "doi": work.doi.lower(), "prefix": work.doi.partition("/")[0],
        "identifiers": [], "creators": creators,
        "titles": [{"title": work.title}, {"title": "Data and code", "titleType": "Subtitle"}],
        "publisher": work.publisher, "container": container,
        "publicationYear": work.issued[0] if work.issued else None,
        "subjects": [], "contributors": [],
        "dates": [{"date": issued, "dateType": "Issued"},
                  {"date": "2024-03-04", "dateType": "Available"}] if work.issued else [],
        "language": work.language,
        "types": {"ris": "DATA", "bibtex": "misc", "citeproc": work.csl_type,
                  "schemaOrg": "Dataset",
                  "resourceTypeGeneral": _RESOURCE_TYPE_NAMES.get(work.csl_type, "Text")},
        "relatedIdentifiers": related, "sizes": [], "formats": [], "version": "1.0",
        "rightsList": [{"rights": "Creative Commons Attribution 4.0 International"}],
        "descriptions": [{"description": f"Observations behind {work.title.lower()}.",
                          "descriptionType": "Abstract"}],
        "url": f"https://repository.example/{work.doi}", "state": "findable",
        "created": "2024-03-04T10:00:00.000Z", "registered": "2024-03-04T10:00:01.000Z",
        "updated": "2025-01-02T06:40:00.000Z",
    }
    if work.authors is None:  # no creator list at all
        del attributes["creators"]
    return {"id": work.doi.lower(), "type": "dois", "attributes": attributes,
            "relationships": {"client": {"data": {"id": "example.repo", "type": "clients"}}}}


def _issn_form(issn: str) -> str:
    """An ISSN with its hyphen (a work may hold one without, as a record may)."""
    return f"{issn[:4]}-{issn[4:]}" if len(issn) == 8 and "-" not in issn else issn


def expected_metadata(work: Work) -> dict[str, Any] | None:
    """The typed columns a correct reader makes of the work's CSL-JSON (None: the agency has
    no content negotiation, so the key ends ``no_metadata``)."""
    if work.agency == "nocn":
        return None
    issued = (f"{work.issued[0]:04d}" + "".join(f"-{p:02d}" for p in work.issued[1:])
              if work.issued else None)
    first = None
    if work.authors:
        author = work.authors[0]
        first = author if isinstance(author, str) else f"{author[0]}, {author[1]}"

    def joined(items: tuple[tuple[str, str], ...]) -> str | None:
        return "; ".join(f"{kind}:{doi}" for kind, doi in items) or None

    return {
        "title": work.title, "csl_type": work.csl_type,
        "registry_type": registry_type_of_work(work), "issued": issued,
        "year": work.issued[0] if work.issued else None,
        "container_title": work.container_title, "publisher": work.publisher,
        "issn": ", ".join(dict.fromkeys(_issn_form(i) for i in work.issn)) or None,
        "isbn": ", ".join(dict.fromkeys(work.isbn)) or None, "volume": work.volume,
        "issue": work.issue, "page": work.page,
        "author_count": None if work.authors is None else len(work.authors),
        "first_author": first, "language": work.language,
        "license_url": work.license_url if work.agency == "crossref" else None,
        # Only Crossref's records carry licences and update links (Crossmark).
        "updated_by": joined(work.updated_by) if work.agency == "crossref" else None,
        "update_to": joined(work.update_to) if work.agency == "crossref" else None,
    }


def hostile_body(work: Work) -> tuple[int, bytes, str]:
    """``(status, body, content type)`` of a work whose fault is in its body."""
    csl = csl_for(work)
    fault = work.fault
    if fault == "html_200":
        return 200, b"<!DOCTYPE html><html><body><h1>Landing page</h1></body></html>", "text/html"
    if fault == "truncated":
        text = json.dumps(csl).encode("utf-8")
        return 200, text[: len(text) // 2], MEDIA_TYPES["crossref"]
    if fault == "latin1":
        csl["title"] = "Caf\u00e9 \u00e0 la r\u00e9gion: \u00e9t\u00e9s chauds"
        return 200, json.dumps(csl, ensure_ascii=False).encode("cp1252"), MEDIA_TYPES["crossref"]
    if fault == "wrong_types":
        csl.update(title=42, author="Smith, J.", issued=["2019"], ISSN={"print": "1234-5679"})
        return 200, json.dumps(csl).encode("utf-8"), MEDIA_TYPES["crossref"]
    if fault == "deep":
        nested = "[" * 1000 + "]" * 1000
        return 200, f'{{"title": {nested}}}'.encode(), MEDIA_TYPES["crossref"]
    if fault == "not_json_object":
        return 200, json.dumps([csl]).encode("utf-8"), MEDIA_TYPES["crossref"]
    if fault == "status_500":
        return 500, b'{"message": "internal error"}', "application/json"
    return 200, json.dumps(csl).encode("utf-8"), MEDIA_TYPES["crossref"]


@dataclass
class AgencyCounts:
    """What the agency servers saw (reset with the simulator's counts)."""

    by_agency: dict[str, int] = field(default_factory=dict)
    by_key: dict[str, int] = field(default_factory=dict)
    user_agents: dict[str, int] = field(default_factory=dict)
