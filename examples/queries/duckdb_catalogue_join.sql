-- Joining two messy catalogues on DOIs in DuckDB, the way Z39.84 says.
--
--   duckdb catalogue.duckdb < sql/duckdb/doi_functions.sql    -- once: creates the macros
--   duckdb catalogue.duckdb < examples/queries/duckdb_catalogue_join.sql
--
-- upper(trim(doi)) would join 10.1000/STRASSE to 10.1000/straße and miss every URL, URN and
-- percent-encoded form; doi_key does neither.

CREATE OR REPLACE TEMP TABLE library AS
SELECT * FROM (VALUES
    (1, 'DOI Handbook', 'https://doi.org/10.1000/182'),
    (2, 'Cell paper', 'doi:10.1016/J.CELL.2009.01.002'),
    (3, 'German suffix', '10.1000/straße'),
    (4, 'Encoded', 'https://dx.doi.org/10.1000/456%23789'),
    (5, 'Typo', '10.100O/182')
) AS t(id, title, doi);

CREATE OR REPLACE TEMP TABLE citations AS
SELECT * FROM (VALUES
    ('10.1000/182', 12),
    ('10.1016/j.cell.2009.01.002 ', 340),
    ('10.1000/STRASSE', 1),
    ('urn:doi:10.1000:456%23789', 7)
) AS t(doi, cited_by);

-- 1. Data quality: what is wrong with each value that is not a valid DOI.
SELECT id, doi, doi_reason(doi) AS reason
FROM library
WHERE NOT doi_is_valid(doi)
ORDER BY id;

-- 2. The join: on the comparison key, showing the normalized DOI and its resolvable URL.
SELECT l.id, l.title, doi_normalize(l.doi) AS doi, doi_url(l.doi) AS url, c.cited_by
FROM library AS l
JOIN citations AS c ON doi_key(l.doi) = doi_key(c.doi)
ORDER BY l.id;

-- 3. Duplicates by key inside one catalogue.
SELECT doi_key(doi) AS doi_key, count(*) AS n
FROM citations
WHERE doi_key(doi) IS NOT NULL
GROUP BY ALL
HAVING count(*) > 1;
