"""DataCite's REST API: many DOIs in one ``GET /dois``, each JSON:API record read as CSL-JSON.

``GET {datacite}/dois?query=doi:("A" OR "B" ...)&page[size]=N`` answers the record of every
listed DOI DataCite holds, in JSON:API form (``data[].attributes``). Pure functions, standard
library only, as :mod:`airflow_doi.metadata.crossref`:

* :func:`list_batches` / :func:`list_url`: requests under a count and a URL length;
* :func:`read_records`: the answer's records, or :class:`CslError`;
* :func:`csl_of_record`: one record as the CSL-JSON object DataCite's content negotiation sends
  for it (``types.citeproc``, the first main title, the issued date, the creators, the
  container), so a key gets the same columns whichever answered it. The JSON:API record says
  more than DataCite's CSL-JSON about a licence: ``rightsList[].rightsUri`` becomes the
  licence URL (CSL-JSON from DataCite carries only the rights statement).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import parse_qs, quote, urlsplit

from airflow_doi.metadata.csl import CslError, read_document

__all__ = [
    "CSL_TO_RESOURCE_TYPE",
    "RESOURCE_TYPES",
    "UPDATES_PAGE",
    "csl_of_record",
    "list_batches",
    "list_url",
    "read_records",
    "read_updates",
    "record_doi",
    "registry_type_of",
    "updates_url",
]

#: Records a page of the update stream asks for (DataCite's most).
UPDATES_PAGE: Final = 1000

#: DataCite's resourceTypeGeneral -> a CSL type, where a record has no ``types.citeproc``.
RESOURCE_TYPES: Final[dict[str, str]] = {
    "Audiovisual": "motion_picture", "Book": "book", "BookChapter": "chapter",
    "Collection": "collection", "ConferencePaper": "paper-conference",
    "ConferenceProceeding": "book", "DataPaper": "article-journal", "Dataset": "dataset",
    "Dissertation": "thesis", "Event": "event", "Image": "graphic",
    "Journal": "periodical", "JournalArticle": "article-journal", "Model": "dataset",
    "Preprint": "article", "Report": "report", "Software": "software", "Sound": "song",
    "Standard": "standard", "Text": "article", "Workflow": "software",
}
#: CSL types -> DataCite's resourceTypeGeneral (the commonest where several map to one), for a
#: ``registry_type`` from an answer that names only the CSL type.
CSL_TO_RESOURCE_TYPE: Final[dict[str, str]] = {
    "dataset": "Dataset", "article-journal": "JournalArticle", "chapter": "BookChapter",
    "book": "Book", "paper-conference": "ConferencePaper", "thesis": "Dissertation",
    "report": "Report", "software": "Software", "article": "Preprint",
    "collection": "Collection", "event": "Event", "graphic": "Image",
    "motion_picture": "Audiovisual", "song": "Sound", "standard": "Standard",
    "periodical": "Journal",
}
_DATE: Final = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?")
_IDENTIFIER_KINDS: Final = ("ISSN", "ISBN")


def _quoted(doi: str) -> str:
    """A DOI as a quoted term of DataCite's query language (``"`` and ``\\`` escaped)."""
    return '"' + doi.replace("\\", "\\\\").replace('"', '\\"') + '"'


def list_url(base: str, dois: Sequence[str], contact: str | None = None) -> str:
    """The batch lookup of ``dois``, one page holding them all.

    DataCite's index is case-sensitive (datacite/datacite#2115): its ``doi`` field holds each
    DOI upper-cased and matches only that form, its ``id`` field the lower-cased one. DOIs are
    written every way (lower case, as DataCite's own landing pages show them, above all), so
    each goes in the form the ``doi`` field holds."""
    query = "doi:(" + " OR ".join(_quoted(doi.upper()) for doi in dois) + ")"
    url = (f"{base.rstrip('/')}/dois?query={quote(query, safe='')}"
           f"&page%5Bsize%5D={len(dois)}&affiliation=false")
    if contact:
        url += f"&mailto={quote(contact, safe='@.')}"
    return url


def list_batches(dois: Sequence[str], base: str, *, size: int, max_url: int,
                 contact: str | None = None) -> list[list[str]]:
    """``dois`` in requests of at most ``size`` DOIs whose URL stays under ``max_url``."""
    batches: list[list[str]] = []
    current: list[str] = []
    for doi in dois:
        if current and (len(current) >= size
                        or len(list_url(base, [*current, doi], contact)) > max_url):
            batches.append(current)
            current = []
        current.append(doi)
    if current:
        batches.append(current)
    return batches


def read_records(body: bytes) -> list[Any]:
    """The records of a ``/dois`` answer (``data``), or :class:`CslError`."""
    document = read_document(body)
    data = document.get("data")
    if not isinstance(data, list):
        raise CslError("the DataCite answer has no list of records (data)")
    return data


def updates_url(base: str, since: str, cursor: str | None, rows: int = UPDATES_PAGE,
                contact: str | None = None) -> str:
    """A page of the records updated since ``since`` (``YYYY-MM-DD``): ``/dois?query=
    updated:[since TO *]`` with cursor paging (``page[cursor]=1`` first, then the cursor of the
    page's ``links.next``)."""
    query = f"updated:[{since} TO *]"
    url = (f"{base.rstrip('/')}/dois?query={quote(query, safe='')}&page%5Bsize%5D={rows}"
           f"&page%5Bcursor%5D={quote(cursor or '1', safe='')}&affiliation=false")
    if contact:
        url += f"&mailto={quote(contact, safe='@.')}"
    return url


def read_updates(body: bytes) -> tuple[list[Any], str | None, int | None]:
    """``(records, next cursor, total)`` of a page of the update stream: the cursor is read
    out of ``links.next`` (never followed as a URL: the next page is asked of the configured
    host), None on the last page; or :class:`CslError`."""
    document = read_document(body)
    data = document.get("data")
    if not isinstance(data, list):
        raise CslError("the DataCite page has no list of records (data)")
    links = document.get("links")
    following = links.get("next") if isinstance(links, Mapping) else None
    cursor = None
    if isinstance(following, str):
        values = parse_qs(urlsplit(following).query).get("page[cursor]")
        cursor = values[0] if values and values[0] else None
    meta = document.get("meta")
    total = meta.get("total") if isinstance(meta, Mapping) else None
    return data, cursor, total if isinstance(total, int) and not isinstance(total, bool) else None


def registry_type_of(record: Mapping[str, Any]) -> str | None:
    """DataCite's own word for a record's type: its ``types.resourceTypeGeneral``."""
    attributes = record.get("attributes")
    types = attributes.get("types") if isinstance(attributes, Mapping) else None
    kind = types.get("resourceTypeGeneral") if isinstance(types, Mapping) else None
    return kind if isinstance(kind, str) else None


def record_doi(record: object) -> str | None:
    """The DOI a record answers for (None: a record of the wrong shape)."""
    if not isinstance(record, Mapping):
        return None
    attributes = record.get("attributes")
    doi = attributes.get("doi") if isinstance(attributes, Mapping) else None
    doi = doi if isinstance(doi, str) else record.get("id")
    return doi.strip() or None if isinstance(doi, str) else None


def csl_of_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """One DataCite JSON:API record as a CSL-JSON object (see the module docstring)."""
    attributes = record.get("attributes")
    a: Mapping[str, Any] = attributes if isinstance(attributes, Mapping) else {}
    csl: dict[str, Any] = {}
    doi = record_doi(record)
    if doi:
        csl["DOI"] = doi
    types = a.get("types")
    if isinstance(types, Mapping):
        kind = types.get("citeproc")
        if not isinstance(kind, str) or not kind:
            kind = RESOURCE_TYPES.get(str(types.get("resourceTypeGeneral")))
        if kind:
            csl["type"] = kind
    title = _title(a.get("titles"))
    if title is not None:
        csl["title"] = title
    issued = _issued(a.get("dates"), a.get("publicationYear"))
    if issued is not None:
        csl["issued"] = issued
    container = a.get("container")
    if isinstance(container, Mapping):
        if isinstance(container.get("title"), str) and container["title"].strip():
            csl["container-title"] = container["title"]
        for name in ("volume", "issue"):
            if container.get(name) not in (None, ""):
                csl[name] = container[name]
        first, last = container.get("firstPage"), container.get("lastPage")
        if first not in (None, ""):
            csl["page"] = f"{first}-{last}" if last not in (None, "") else first
    publisher = a.get("publisher")
    if isinstance(publisher, Mapping):  # publisher=true asks for an object
        publisher = publisher.get("name")
    if publisher is not None:
        csl["publisher"] = publisher
    for kind in _IDENTIFIER_KINDS:
        found = _identifiers(a, container, kind)
        if found:
            csl[kind] = found
    creators = a.get("creators")
    if isinstance(creators, list):
        csl["author"] = [_person(creator) for creator in creators]
    elif creators is not None:
        csl["author"] = creators
    if a.get("language") is not None:
        csl["language"] = a["language"]
    licences = [{"URL": r["rightsUri"]} for r in a.get("rightsList") or []
                if isinstance(r, Mapping) and isinstance(r.get("rightsUri"), str)]
    if licences:
        csl["license"] = licences
    return csl


def _title(titles: object) -> object:
    """The main title: the first without a ``titleType`` (a subtitle, a translation...)."""
    if not isinstance(titles, list):
        return titles
    entries = [t for t in titles if isinstance(t, Mapping) and isinstance(t.get("title"), str)]
    main = [t for t in entries if not t.get("titleType")] or entries
    return main[0]["title"] if main else None


def _issued(dates: object, year: object) -> dict[str, Any] | None:
    """The ``Issued`` date as CSL date-parts, else the publication year."""
    for entry in dates if isinstance(dates, list) else []:
        if isinstance(entry, Mapping) and entry.get("dateType") == "Issued":
            found = _DATE.match(str(entry.get("date", "")))
            if found:
                return {"date-parts": [[int(g) for g in found.groups() if g is not None]]}
    if isinstance(year, str) and year.strip().isdigit():
        year = int(year)
    if isinstance(year, int) and not isinstance(year, bool):
        return {"date-parts": [[year]]}
    return None


def _identifiers(a: Mapping[str, Any], container: object, kind: str) -> list[str]:
    """The ISSNs or ISBNs of the work: the container's, and what it ``IsPartOf``."""
    found: list[str] = []
    if (isinstance(container, Mapping) and container.get("identifierType") == kind
            and isinstance(container.get("identifier"), str)):
        found.append(container["identifier"])
    for related in a.get("relatedIdentifiers") or []:
        if (isinstance(related, Mapping) and related.get("relatedIdentifierType") == kind
                and related.get("relationType") == "IsPartOf"
                and isinstance(related.get("relatedIdentifier"), str)):
            found.append(related["relatedIdentifier"])
    return found


def _person(creator: object) -> object:
    if not isinstance(creator, Mapping):
        return creator
    family = creator.get("familyName")
    if creator.get("nameType") != "Organizational" and isinstance(family, str) and family:
        person: dict[str, Any] = {"family": family}
        if isinstance(creator.get("givenName"), str):
            person["given"] = creator["givenName"]
        return person
    name = creator.get("name")
    return {"literal": name} if isinstance(name, str) else {}
