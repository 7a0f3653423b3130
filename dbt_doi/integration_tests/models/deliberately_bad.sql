-- Rows that must make valid_doi and unique_doi fail (their tests carry the tag
-- expected_failure, are excluded from the normal build and run on their own by the suite).
select id, doi from {{ ref('deliberately_bad_dois') }}
