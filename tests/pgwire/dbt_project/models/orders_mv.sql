{{ config(materialized='materialized_view') }}
select count(*) as n, sum(amount) as total from {{ ref('orders_v') }}
