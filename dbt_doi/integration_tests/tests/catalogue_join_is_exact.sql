-- The join on doi_key finds exactly these pairs: case and presentation forms match; ß/SS
-- and İ/i do not (the key folds ASCII only).
with expected as (
    select 1 as id, 101 as record_id union all
    select 2, 102 union all
    select 4, 104 union all
    select 5, 105 union all
    select 6, 106 union all
    select 10, 108
),

actual as (
    select id, record_id from {{ ref('catalogue_matches') }}
)

select 'missing' as problem, * from (select * from expected except select * from actual) m
union all
select 'unexpected' as problem, * from (select * from actual except select * from expected) u
