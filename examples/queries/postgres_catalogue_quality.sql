-- DOI data quality and joins in PostgreSQL.
--
--   psql -v ON_ERROR_STOP=1 -f sql/postgres/doi_functions.sql        -- once
--   psql -v ON_ERROR_STOP=1 -f examples/queries/postgres_catalogue_quality.sql
--
-- The functions are IMMUTABLE, so an expression index on doi_key(doi) makes key joins and
-- lookups index-backed.

CREATE TEMP TABLE works (id int PRIMARY KEY, doi text);
INSERT INTO works VALUES
    (1, 'https://doi.org/10.1000/182'),
    (2, 'DOI: 10.1002/(SICI)1097-4571(199806)49:8<693::AID-ASI4>3.0.CO;2-0'),
    (3, '10.1000/İstanbul'),
    (4, 'n/a'),
    (5, NULL),
    (6, 'info:doi/10.1000/a/b');

CREATE INDEX works_doi_key ON works (doi_key(doi));

-- 1. How many values fail, and why (NULL counts as 'empty').
SELECT coalesce(doi_reason(doi), 'valid') AS status, count(*) AS n
FROM works
GROUP BY 1
ORDER BY 1;

-- 2. A lookup by any spelling of the DOI uses the index.
SELECT id, doi_normalize(doi) AS doi, doi_url(doi) AS url
FROM works
WHERE doi_key(doi) = doi_key('10.1000/182');

-- 3. Clean export: normalized DOIs and their keys, invalid rows left out.
SELECT id, doi_normalize(doi) AS doi, doi_key(doi) AS doi_key
FROM works
WHERE doi_is_valid(doi)
ORDER BY id;
