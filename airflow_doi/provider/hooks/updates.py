"""The agencies' update streams into ``doi_metadata``: the catalogue's keys that changed.

:func:`refresh_from_streams` harvests Crossref's and DataCite's update streams since the last
harvest recorded beside the metadata table (or since the data files' date, or a date given;
:mod:`airflow_doi.metadata.updates`) and upserts the rows of the catalogue's keys whose records
changed; keys the streams never mention stay as they are until they expire. Each page's rows
and the stream's place (its next cursor) are committed together in
``<metadata_table>_sources`` (:data:`~airflow_doi.provider.hooks.snapshots.SOURCES_SHAPE`): a
task killed halfway is retried from the page it had reached, and the rows it stored are not
written again.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_doi.db.statements import bulk_upsert, quote_identifier
from airflow_doi.provider.hooks.due_keys import Store, answer_row
from airflow_doi.provider.hooks.enrichment import METADATA_SHAPE
from airflow_doi.provider.hooks.snapshots import (
    SOURCES_SHAPE,
    prepare_metadata_tables,
    sources_table_of,
)
from airflow_doi.provider.hooks.sql import dialect_of
from airflow_doi.provider.progress import TaskLog

if TYPE_CHECKING:
    from airflow.providers.common.sql.hooks.sql import DbApiHook

    from airflow_doi.metadata.config import MetadataConfig
    from airflow_doi.metadata.result import MetadataResult
    from airflow_doi.metadata.updates import StreamState

__all__ = ["UPDATES_SCAN", "refresh_from_streams"]

#: The ``scan`` of a harvest's rows in the sources table.
UPDATES_SCAN = "updates"


def _state_row(state: StreamState, dialect: Any) -> tuple[Any, ...]:
    detail = json.dumps({"since": state.since, "cursor": state.cursor, "pages": state.pages,
                         "restarts": state.restarts, "requests": state.requests,
                         "started_at": state.started_at.isoformat(),
                         "finished": state.finished}, sort_keys=True)
    return (state.id, UPDATES_SCAN, state.source,
            dialect.timestamp(datetime.now(timezone.utc)), state.records, state.found, detail)


Source = tuple[str, str, str, "str | None", int, int]


def _read_sources(store: Store, sources_table: str) -> list[Source]:
    """``(id, scan, member, detail, records, found)`` of every row of the sources table."""
    rows: list[Source] = []

    def read(cursor: Any) -> None:
        names = ", ".join(quote_identifier(n) for n in ("id", "scan", "member", "detail",
                                                        "records", "found"))
        cursor.execute(f"SELECT {names} FROM {quote_identifier(sources_table)}")
        rows.extend((str(a), str(b), str(c), d, int(e or 0), int(f or 0))
                    for a, b, c, d, e, f in cursor.fetchall())

    store.transaction(read)
    return rows


def _harvests(sources: list[Source]) -> list[dict[str, Any]]:
    """The harvests the sources table recorded, newest first, as
    :func:`~airflow_doi.metadata.updates.harvest_days` reads them."""
    held = []
    for _, scan, member, detail, records, found in sources:
        facts = _facts(detail) if scan == UPDATES_SCAN else {}
        if facts.get("since") and facts.get("started_at"):
            held.append({"source": member, "since": facts["since"],
                         "started_at": facts["started_at"], "cursor": facts.get("cursor"),
                         "pages": facts.get("pages", 0), "records": records, "found": found,
                         "finished_at": facts["started_at"] if facts.get("finished") else None})
    return sorted(held, key=lambda row: str(row["started_at"]), reverse=True)


def _facts(detail: str | None) -> dict[str, Any]:
    try:
        facts = json.loads(detail) if detail else {}
    except ValueError:
        return {}
    return facts if isinstance(facts, dict) else {}


def _files_day(sources: list[Source], files_date: datetime | None) -> str:
    """When the newest record of the data files read into the table last changed (else
    their date, or ``files_date``)."""
    from airflow_doi.metadata.config import since_text

    newest = [str(f["newest"]) for _, scan, _, detail, _, _ in sources
              if scan != UPDATES_SCAN and (f := _facts(detail)).get("newest")]
    if newest:
        return since_text(max(newest))
    dated = [str(f["date"]) for _, scan, _, detail, _, _ in sources
             if scan != UPDATES_SCAN and (f := _facts(detail)).get("date")]
    if files_date is not None:
        dated.append(files_date.isoformat())
    if dated:
        return since_text(datetime.fromisoformat(max(dated)))
    raise ValueError("updates: no date to start from: no harvest has finished into this metadata "
                     "table and no data files were read into it; pass snapshot=, or "
                     "updates='YYYY-MM-DD'")


def refresh_from_streams(
    db_hook: DbApiHook, config: MetadataConfig, *, table: str, metadata_table: str,
    since: str = "auto", key_column: str = "doi_key", doi_column: str = "doi",
    valid_column: str = "doi_valid", files_date: datetime | None = None, log: TaskLog,
) -> dict[str, Any]:
    """Harvest the update streams for every valid key of ``table`` into ``metadata_table``
    (see the module docstring); what each stream read, by source."""
    from airflow_doi.metadata.result import MetadataStats
    from airflow_doi.metadata.updates import StreamState, harvest, harvest_days

    for name in (table, metadata_table, key_column, doi_column, valid_column):
        quote_identifier(name)
    dialect = dialect_of(db_hook)
    sources_table = sources_table_of(metadata_table)
    with Store(db_hook, dialect) as store:
        prepare_metadata_tables(store, table, metadata_table, {
            "key_column": key_column, "doi_column": doi_column, "valid_column": valid_column})
        sources = _read_sources(store, sources_table)
        held = _harvests(sources)
        days = harvest_days(held, since, lambda: _files_day(sources, files_date))
        states: dict[str, StreamState] = {}
        for row in held:  # newest first: each source's unfinished harvest of its day
            name = row["source"]
            if name in states or row["finished_at"] is not None or row["since"] != days.get(name):
                continue
            states[name] = StreamState(name, row["since"],
                                       datetime.fromisoformat(row["started_at"]),
                                       row["cursor"], row["pages"], row["records"], row["found"])
        keys = _valid_keys(store, table, key_column, doi_column, valid_column)
        stored = _stored_since(store, metadata_table, states)
        log.info("Update streams since %s for the %d valid keys of %s%s",
                 ", ".join(f"{name} {day}" for name, day in days.items()), len(keys),
                 table, f" (going on from {', '.join(states)})" if states else "")

        def on_page(state: StreamState, rows: list[MetadataResult]) -> None:
            written = [answer_row(r.key or "", r.doi or "", r, METADATA_SHAPE.columns, dialect)
                       for r in rows]

            def write(cursor: Any) -> None:
                bulk_upsert(cursor, dialect, metadata_table, METADATA_SHAPE.columns, written,
                            key="doi_key", types=METADATA_SHAPE.types(dialect))
                bulk_upsert(cursor, dialect, sources_table, SOURCES_SHAPE.columns,
                            [_state_row(state, dialect)], key="id",
                            types=SOURCES_SHAPE.types(dialect))

            store.transaction(write)
            if state.pages % 20 == 0 or state.finished:
                log.info("Update stream %s: %d pages, %d changed records, %d of them the "
                         "catalogue's%s", state.source, state.pages, state.records, state.found,
                         " (finished)" if state.finished else "")

        stats = MetadataStats()
        finished = harvest(keys, days, config=config, on_page=on_page, states=states,
                           stored=stored, stats=stats)
    summary = {name: {"since": s.since, "pages": s.pages, "records": s.records,
                      "found": s.found, "requests": s.requests, "restarts": s.restarts,
                      "finished": s.finished, "error": s.error}
               for name, s in finished.items()}
    for name, state in finished.items():
        if state.error:
            log.warning("Update stream %s stopped before its end (%s): the pages read are "
                        "stored; the next run goes on from its last page", name, state.error)
    log.info("Update streams: %s", "; ".join(
        f"{name} {s['pages']} pages, {s['records']} records, {s['found']} keys stored"
        for name, s in summary.items()) or "no batch API on the allowlist")
    return summary


def _valid_keys(store: Store, table: str, key_column: str, doi_column: str,
                valid_column: str) -> dict[str, str]:
    """Every valid key of the catalogue with its DOI as written (the first)."""
    dialect = store.dialect
    found: dict[str, str] = {}
    key = quote_identifier(key_column)

    def read(cursor: Any) -> None:
        cursor.execute(f"SELECT {key}, MIN({quote_identifier(doi_column)}) FROM "
                       f"{quote_identifier(table)} WHERE {quote_identifier(valid_column)} = "
                       f"{dialect.marks()} AND {key} IS NOT NULL GROUP BY {key}", [True])
        while True:
            rows = cursor.fetchmany(50_000)
            if not rows:
                break
            found.update((str(k), str(d)) for k, d in rows)

    store.transaction(read)
    return found


def _stored_since(store: Store, metadata_table: str,
                  states: dict[str, StreamState]) -> set[str]:
    """Keys an unfinished harvest already stored (not written again when it goes on)."""
    dialect = store.dialect
    found: set[str] = set()

    def read(cursor: Any) -> None:
        for state in states.values():
            if state.finished:
                continue
            cursor.execute(
                f'SELECT "doi_key" FROM {quote_identifier(metadata_table)} WHERE '
                f'"metadata_source" = {dialect.marks()} AND "fetched_at" >= {dialect.marks()}',
                [f"{state.source}_updates", dialect.timestamp(state.started_at)])
            found.update(str(row[0]) for row in cursor.fetchall())

    store.transaction(read)
    return found
