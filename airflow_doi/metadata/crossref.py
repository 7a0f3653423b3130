"""Crossref's REST API list queries: many DOIs in one request, each record read as CSL-JSON.

``GET {crossref}/works?filter=doi:A,doi:B,...&rows=N`` answers the ``/works`` records of every
listed DOI it knows (Crossref ORs a repeated filter; its maintainers advise it for batches,
rest-api-doc #301). Pure functions, standard library only:

* :func:`list_batches` splits DOIs into requests under a count and a URL length;
* :func:`list_url` writes one request (``mailto`` for the polite pool when a contact is set);
* :func:`read_items` reads the answer's records, or raises :class:`CslError`;
* :func:`csl_of_item` turns one ``/works`` record into the CSL-JSON object that
  :func:`airflow_doi.metadata.csl.typed_fields` reads, so a key gets the same columns whether
  Crossref's list query or content negotiation answered it.

A DOI holding a comma cannot be put in a filter (the comma separates filters): it is asked by
content negotiation instead, as is every DOI a list answer leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

from airflow_doi.metadata.csl import CROSSREF_TYPES, CslError, read_document

__all__ = [
    "CROSSREF_TYPES",
    "CSL_TO_CROSSREF",
    "UPDATES_PAGE",
    "csl_of_item",
    "csl_type_of",
    "item_doi",
    "list_batches",
    "list_url",
    "listable",
    "read_items",
    "read_updates",
    "registry_type_of",
    "updates_url",
]

#: Records a page of the update stream asks for (Crossref's most with a cursor).
UPDATES_PAGE: Final = 1000

#: CSL types -> Crossref's own names (the commonest where several map to one), for a
#: ``registry_type`` from an answer that names only the CSL type.
CSL_TO_CROSSREF: Final[dict[str, str]] = {
    "article-journal": "journal-article", "chapter": "book-chapter",
    "paper-conference": "proceedings-article", "article": "posted-content", "book": "book",
    "dataset": "dataset", "report": "report", "thesis": "dissertation",
    "entry": "reference-entry", "review": "peer-review", "standard": "standard",
    "periodical": "journal", "document": "other",
}
#: Fields copied as they are: Crossref's ``/works`` record and CSL-JSON name them alike.
_SAME: Final[tuple[str, ...]] = (
    "DOI", "issued", "publisher", "ISSN", "ISBN", "volume", "issue", "page", "language",
    "license", "update-to", "updated-by",
)
#: Left as they are in a DOI of a filter; the rest is percent-encoded: the filter's own
#: separators (``,``), the query string's (``&``, ``=``, ``#``) and ``+``, which a server reads
#: as a space in a query.
_QUERY_SAFE: Final = "/:;()[]<>@!$'*.-_~"


def csl_type_of(crossref_type: object) -> object:
    """The CSL type of a Crossref type name (a name CSL already knows passes as it is)."""
    if isinstance(crossref_type, str):
        return CROSSREF_TYPES.get(crossref_type, crossref_type)
    return crossref_type


def registry_type_of(item: Mapping[str, Any]) -> str | None:
    """Crossref's own name of a record's type (``journal-article``)."""
    kind = item.get("type")
    return kind if isinstance(kind, str) else None


def listable(doi: str) -> bool:
    """Whether a DOI can go in a ``doi:`` filter (a comma would end it)."""
    return "," not in doi


def list_url(base: str, dois: Sequence[str], contact: str | None = None) -> str:
    """The list query for ``dois``: every one as a ``doi:`` filter, as many rows."""
    filters = ",".join(f"doi:{quote(doi, safe=_QUERY_SAFE)}" for doi in dois)
    url = f"{base.rstrip('/')}/works?filter={filters}&rows={len(dois)}"
    if contact:
        url += f"&mailto={quote(contact, safe='@.')}"
    return url


def list_batches(dois: Sequence[str], base: str, *, size: int, max_url: int,
                 contact: str | None = None) -> list[list[str]]:
    """``dois`` in requests of at most ``size`` DOIs whose URL stays under ``max_url``
    characters (a DOI too long for any request goes alone: its URL is the server's problem,
    and content negotiation is the fallback)."""
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


def read_items(body: bytes) -> list[Any]:
    """The records of a list answer (``message.items``), or :class:`CslError`."""
    document = read_document(body)
    message = document.get("message")
    items = message.get("items") if isinstance(message, Mapping) else None
    if document.get("status") not in (None, "ok") or not isinstance(items, list):
        raise CslError("the Crossref list answer has no list of items")
    return items


def updates_url(base: str, since: str, cursor: str | None, rows: int = UPDATES_PAGE,
                contact: str | None = None) -> str:
    """A page of the records updated since ``since`` (``YYYY-MM-DD``): ``/works?filter=
    from-update-date:...`` with deep paging (``cursor=*`` first, then each page's
    ``next-cursor``, percent-encoded: a cursor holds ``+``, ``/`` and ``=``)."""
    url = (f"{base.rstrip('/')}/works?filter=from-update-date:{quote(since, safe='-')}"
           f"&rows={rows}&cursor={quote(cursor or '*', safe='*')}")
    if contact:
        url += f"&mailto={quote(contact, safe='@.')}"
    return url


def read_updates(body: bytes) -> tuple[list[Any], str | None, int | None]:
    """``(records, next cursor, total)`` of a page of the update stream (the stream has ended
    when a page holds no record), or :class:`CslError`."""
    document = read_document(body)
    message = document.get("message")
    items = message.get("items") if isinstance(message, Mapping) else None
    if document.get("status") not in (None, "ok") or not isinstance(items, list):
        raise CslError("the Crossref page has no list of items")
    assert isinstance(message, Mapping)
    cursor = message.get("next-cursor")
    total = message.get("total-results")
    return (items, cursor if isinstance(cursor, str) and cursor else None,
            total if isinstance(total, int) and not isinstance(total, bool) else None)


def csl_of_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """One Crossref ``/works`` record as a CSL-JSON object.

    The record's lists become CSL's scalars where CSL has one (``title``, ``container-title``:
    the first that is not empty), its type names CSL's, an author given only by ``name`` (an
    organisation) a ``literal`` one; dates, licences and the update links are the same shape
    in both. Anything of an unexpected type is passed on as it is, for
    :func:`~airflow_doi.metadata.csl.typed_fields` to name.
    """
    csl: dict[str, Any] = {name: item[name] for name in _SAME if name in item}
    if "type" in item:
        csl["type"] = csl_type_of(item["type"])
    for name in ("title", "container-title"):
        value = item.get(name)
        if isinstance(value, list):
            first = next((v for v in value if isinstance(v, str) and v.strip()), None)
            if first is not None:
                csl[name] = first
        elif value is not None:
            csl[name] = value
    authors = item.get("author")
    if isinstance(authors, list):
        csl["author"] = [_person(author) for author in authors]
    elif authors is not None:
        csl["author"] = authors
    return csl


def _person(author: object) -> object:
    if not isinstance(author, Mapping):
        return author
    if "family" not in author and isinstance(author.get("name"), str):
        return {"literal": author["name"]}
    return {name: author[name] for name in ("family", "given", "literal") if name in author}


def item_doi(item: object) -> str | None:
    """The DOI a record answers for (None: a record of the wrong shape)."""
    if isinstance(item, Mapping) and isinstance(item.get("DOI"), str):
        return str(item["DOI"]).strip() or None
    return None
